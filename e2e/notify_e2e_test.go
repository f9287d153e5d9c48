package e2e

import (
	"context"
	"strings"
	"testing"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
)

// TestNotifyAfterApprovalPostsIntoOps: a GitHub event wakes the engineer,
// whose model calls notify to tell #ops; the call waits for a person's
// approval (notify is in the bot's approval_tools), then posts into the ops
// channel as a new message there, through the lanes, and the run ends in the
// PR's thread.
func TestNotifyAfterApprovalPostsIntoOps(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		ms := r.Body.Messages
		if last := ms[len(ms)-1]; last.Role == "tool" {
			return openaitest.Text("Told ops: " + last.Content)
		}
		return openaitest.Calls(openaitest.Call("notify", `{"target":"ops","text":"PR #2 in Codertocat/Hello-World needs a reviewer"}`))
	})
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	approver := slack.HumanActor("T1", "U0ALICE")
	r := startHooks(t, "", fake.APIURL(), llm.URL(), t.TempDir(), func(o *core.Options, reg *agents.Registry) {
		bots := append([]core.BotProfile(nil), e2eTeam...)
		for i := range bots {
			if bots[i].Handle == "engineer" {
				bots[i].Tools, bots[i].ApprovalTools = []string{"notify"}, []string{"notify"}
			}
		}
		o.Bots, o.Approvers = bots, []core.ActorID{approver}
		o.Notify = []core.NotifyTarget{{Name: "ops", Account: "slack/acme", Platform: "slack",
			Conversation: slack.Conversation{Team: "T1", Channel: "COPS"}.Ref()}}
		tl, _ := builtins(t, tools.Options{WorkspaceRoot: t.TempDir()}, "notify").Get("notify")
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	})
	if code := r.github(t, "github_pull_request_opened.json", "d-notify"); code != 202 {
		t.Fatalf("status %d", code)
	}
	var q core.Question
	r.waitStore("the approval question", func(tx core.ReadTx) bool {
		qs, _ := tx.Questions(true, 0)
		if len(qs) == 1 {
			q = qs[0]
		}
		return len(qs) == 1
	})
	if q.Tool != "notify" {
		t.Fatalf("question for %q, want notify", q.Tool)
	}
	if n := len(slackIn(fake, "COPS", "")); n != 0 {
		t.Fatalf("%d posts in ops before the approval", n)
	}
	if res, err := r.eng.Answer(context.Background(), core.Answer{Token: q.Token, Choice: 0, Actor: approver, Name: "Alice", Account: "slack/acme"}); err != nil || res.Outcome != core.AnswerAccepted {
		t.Fatalf("approve: %+v %v", res.Outcome, err)
	}
	r.idle()
	ops := slackIn(fake, "COPS", "needs a reviewer")
	if len(ops) != 1 || ops[0].ThreadTS != "" {
		t.Fatalf("ops channel %+v, want the notice once, at the top level", fake.Messages())
	}
	root := slackIn(fake, "C1", "Pull request #2 opened")
	done := slackIn(fake, "C1", "posted into ops as the start of thread")
	if len(root) != 1 || len(done) != 1 || done[0].ThreadTS != root[0].TS {
		t.Errorf("the run's reply %+v, want it in the PR's thread", done)
	}
	for _, m := range slackIn(fake, "C1", "") {
		if strings.Contains(m.Text, "needs a reviewer") {
			t.Errorf("the notice went to the PR's channel too: %+v", m)
		}
	}
}
