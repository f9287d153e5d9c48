package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
	"openbot/internal/runtest"
)

// slackEvent is an Events API callback for one message event, as Slack sends it.
func slackEvent(t *testing.T, typ, channel, channelType, user, ts, threadTS, text string) []byte {
	t.Helper()
	ev := map[string]any{"type": typ, "channel": channel, "user": user, "ts": ts, "text": text, "team": "T0TEST", "event_ts": ts}
	if channelType != "" {
		ev["channel_type"] = channelType
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, err := json.Marshal(map[string]any{
		"token": "TESTverificationTOKEN000", "team_id": "T0TEST", "api_app_id": "A0TESTAPP",
		"type": "event_callback", "event_id": "Ev" + ts, "event_time": 1767225600, "event": ev,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSlackAppMentionIsTransport: on a whole-team app, "@app @engineer fix X" wakes
// the engineer alone (the app mention is how the message came in), in both the
// app_mention and the message copy Slack sends; "@app fix X" wakes the default bot.
func TestSlackAppMentionIsTransport(t *testing.T) {
	r := startSlack(t, nil)
	for _, typ := range []string{"app_mention", "message"} {
		if code := r.post(t, slackEvent(t, typ, "C0TEST001", "channel", "U0TEST001", "1767225800.000100", "", "<@U0TESTBOT> @engineer fix the build")); code != 200 {
			t.Fatalf("POST = %d", code)
		}
	}
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 0 {
		t.Errorf("the default bot ran %d times for a message naming @engineer, want 0", n)
	}
	if n := len(r.agent.runs("engineer")); n != 1 {
		t.Errorf("engineer ran %d times, want 1", n)
	}
	r.post(t, slackEvent(t, "app_mention", "C0TEST001", "channel", "U0TEST001", "1767225900.000100", "", "<@U0TESTBOT> fix the build"))
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Errorf("the app mention alone ran the default bot %d times, want 1", n)
	}
}

// command sends a signed slash command POST and returns the status and body.
func (r *slackRig) command(t *testing.T, c slacktest.Command) (int, string) {
	t.Helper()
	req, err := slacktest.CommandRequest(context.Background(), r.hook.URL+"/slack/acme/commands", slackSecret, c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return runtest.Do(t, req)
}

// dm posts a DM message from U0TEST001 in D0TEST001 and waits until it is handled.
func (r *slackRig) dm(t *testing.T, ts, threadTS, text string) {
	t.Helper()
	if code := r.post(t, slackEvent(t, "message", "D0TEST001", "im", "U0TEST001", ts, threadTS, text)); code != 200 {
		t.Fatalf("DM POST = %d", code)
	}
	r.idle()
}

// lastRun is the newest run of bot h.
func (r *slackRig) lastRun(t *testing.T, h string) *core.Job {
	t.Helper()
	runs := r.agent.runs(h)
	if len(runs) == 0 {
		t.Fatalf("@%s never ran", h)
	}
	return runs[len(runs)-1]
}

// TestSlackNewInDMLastsAcrossRestart: a DM is one thread until /new; the slash
// command (a signed form POST) is confirmed without a model call, the pending /new
// is stored, survives a restart, and the next DM message begins a new thread that
// the messages after it continue.
func TestSlackNewInDMLastsAcrossRestart(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767225600.000100", "", "hello")
	r.dm(t, "1767225601.000100", "", "still the same topic")
	first := r.lastRun(t, "chief_of_staff").Thread.ID
	if got := r.agent.runs("chief_of_staff"); len(got) != 2 || got[0].Thread.ID != first {
		t.Fatalf("two DMs ran %d times / in different threads", len(got))
	}

	code, body := r.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", UserName: "alice", Command: "/new"})
	if code != 200 || !strings.Contains(body, "Started a new conversation") || !strings.Contains(body, `"ephemeral"`) {
		t.Fatalf("/new answered %d %s", code, body)
	}
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 2 {
		t.Fatalf("/new made a model call (runs %d)", n)
	}

	r.stop()
	r.open(t)

	r.dm(t, "1767225700.000100", "", "a different topic")
	second := r.lastRun(t, "chief_of_staff")
	if second.Thread.ID == first {
		t.Fatal("after /new and a restart the next DM continued the old thread")
	}
	r.dm(t, "1767225701.000100", "", "more on it")
	if got := r.lastRun(t, "chief_of_staff").Thread.ID; got != second.Thread.ID {
		t.Fatalf("the DM after the new thread's first message went to thread %d, want %d", got, second.Thread.ID)
	}
}

// TestSlackPlainNewInDM: a DM that is just "new" works like the slash command.
func TestSlackPlainNewInDM(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767225600.000100", "", "hello")
	first := r.lastRun(t, "chief_of_staff").Thread.ID
	r.dm(t, "1767225601.000100", "", "new")
	r.dm(t, "1767225602.000100", "", "a different topic")
	if got := r.lastRun(t, "chief_of_staff"); got.Thread.ID == first || len(r.agent.runs("chief_of_staff")) != 2 {
		t.Fatalf("runs %d, last in thread %d (first %d): want a second run in a new thread", len(r.agent.runs("chief_of_staff")), got.Thread.ID, first)
	}
}

// TestSlackReplyToBotMessageInDMContinuesThread: in a DM the bots answer at the top
// level; a reply in the Slack thread of a bot's message continues that bot's
// thread (with its history), is answered by that bot, and the answer is posted
// once, where the thread lives.
func TestSlackReplyToBotMessageInDMContinuesThread(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767225600.000100", "", "hello")
	r.dm(t, "1767225601.000100", "", "@engineer look at the build")
	thread := r.lastRun(t, "engineer").Thread.ID
	posts := r.fake.CallsTo("chat.postMessage")
	if len(posts) != 2 || posts[1].Form.Get("thread_ts") != "" {
		t.Fatalf("posts %d, want two top-level DM replies", len(posts))
	}
	// The engineer's reply is the second post; the fake answered it with this ts.
	engineerTS := "1767300000.000002"
	if u := posts[1].Form.Get("username"); !strings.Contains(u, "Engineer") {
		t.Fatalf("second post is from %q, want the engineer", u)
	}

	r.dm(t, "1767225700.000100", engineerTS, "and the lint too?")
	runs := r.agent.runs("engineer")
	if len(runs) != 2 {
		t.Fatalf("engineer ran %d times, want 2 (the reply to its message is for it); chief ran %d", len(runs), len(r.agent.runs("chief_of_staff")))
	}
	if runs[1].Thread.ID != thread {
		t.Fatalf("the reply started thread %d, want the bot message's thread %d", runs[1].Thread.ID, thread)
	}
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Errorf("chief ran %d times, want 1", n)
	}
	posts = r.fake.CallsTo("chat.postMessage")
	if len(posts) != 3 {
		t.Fatalf("posts %d, want 3 (the answer once, not once per binding)", len(posts))
	}
	if tt := posts[2].Form.Get("thread_ts"); tt != "" {
		t.Errorf("answer posted in thread_ts %q, want the DM's top level where the thread lives", tt)
	}

	// A second reply in the same Slack thread stays in the thread too.
	r.dm(t, "1767225701.000100", engineerTS, "thanks")
	if runs := r.agent.runs("engineer"); len(runs) != 3 || runs[2].Thread.ID != thread {
		t.Fatalf("second reply in the Slack thread: engineer runs %d", len(runs))
	}
}

// TestSlackThreadUnderOwnDMMessageStaysItsOwn: a Slack thread under a person's own
// DM message is still its own thread (DESIGN.md §3); only bot messages are joined.
func TestSlackThreadUnderOwnDMMessageStaysItsOwn(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767225600.000100", "", "hello")
	first := r.lastRun(t, "chief_of_staff").Thread.ID
	r.dm(t, "1767225601.000100", "1767225600.000100", "side question")
	if got := r.lastRun(t, "chief_of_staff"); got.Thread.ID == first {
		t.Fatal("a Slack thread under the person's own DM message joined the DM's thread")
	}
	posts := r.fake.CallsTo("chat.postMessage")
	if tt := posts[len(posts)-1].Form.Get("thread_ts"); tt != "1767225600.000100" {
		t.Errorf("answer in thread_ts %q, want the Slack thread", tt)
	}
}
