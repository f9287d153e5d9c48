package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// waitFake waits until cond holds on the fake Slack.
func waitFake(t *testing.T, fake *slacktest.Server, cond func(*slacktest.Server) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, cond); err != nil {
		t.Fatal(err)
	}
}

func ephemeralTo(s *slacktest.Server, user, text string) bool {
	for _, c := range s.CallsTo("chat.postEphemeral") {
		if c.Form.Get("user") == user && strings.Contains(c.Form.Get("text"), text) {
			return true
		}
	}
	return false
}

// TestSlackStopInThread: "@app stop" in a Slack thread by someone who did not
// ask for the work is refused privately and changes nothing; by the person who
// asked it cancels the engineer's run there with a notice in the thread and a
// private confirmation, and no model is called for it.
func TestSlackStopInThread(t *testing.T) {
	script, entered, release := blockEngineer()
	r := startSlack(t, script)
	defer close(release)
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST001", "1767226000.000100", "", "<@U0TESTBOT> @engineer long job"))
	<-entered
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0OTHER01", "1767226001.000100", "1767226000.000100", "<@U0TESTBOT> stop"))
	waitFake(t, r.fake, func(s *slacktest.Server) bool { return ephemeralTo(s, "U0OTHER01", "only an approver") })
	if got := runStatuses(t, r.st); len(got) != 1 || got[0] != core.RunRunning {
		t.Fatalf("after a refused stop runs = %v", got)
	}
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST001", "1767226002.000100", "1767226000.000100", "<@U0TESTBOT> stop"))
	waitFake(t, r.fake, func(s *slacktest.Server) bool { return ephemeralTo(s, "U0TEST001", "Stopped the work of @engineer") })
	if got := runStatuses(t, r.st); len(got) != 1 || got[0] != core.RunCancelled {
		t.Fatalf("after /stop runs = %v", got)
	}
	waitFake(t, r.fake, func(s *slacktest.Server) bool {
		for _, c := range s.CallsTo("chat.postMessage") {
			if strings.Contains(c.Form.Get("text"), "@engineer's work here was stopped by") && c.Form.Get("thread_ts") == "1767226000.000100" {
				return true
			}
		}
		return false
	})
	if n := len(r.agent.runs("chief_of_staff")); n != 0 {
		t.Errorf("a stop message woke the default bot %d times", n)
	}
}

// TestSlackSlashStop: the /stop slash command in a DM stops the DM's current
// thread's work and answers privately; in a channel it explains how to stop a
// thread instead.
func TestSlackSlashStop(t *testing.T) {
	script, entered, release := blockEngineer()
	r := startSlack(t, script)
	defer close(release)
	if code := r.post(t, slackEvent(t, "message", "D0TEST001", "im", "U0TEST001", "1767226100.000100", "", "@engineer long job")); code != 200 {
		t.Fatalf("DM POST = %d", code)
	}
	<-entered
	code, body := r.command(t, slacktest.Command{Channel: "C0TEST001", User: "U0TEST001", Command: "/stop"})
	if code != 200 || !strings.Contains(body, "reply") || !strings.Contains(body, "ephemeral") {
		t.Fatalf("/stop in a channel = %d %s", code, body)
	}
	code, body = r.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/stop"})
	if code != 200 || !strings.Contains(body, "Stopped the work of @engineer") || !strings.Contains(body, "ephemeral") {
		t.Fatalf("/stop in the DM = %d %s", code, body)
	}
	if got := runStatuses(t, r.st); len(got) != 1 || got[0] != core.RunCancelled {
		t.Fatalf("runs = %v", got)
	}
	code, body = r.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/stop"})
	if code != 200 || !strings.Contains(body, "Nothing to stop") {
		t.Fatalf("second /stop = %d %s", code, body)
	}
}
