package e2e

// End-to-end test of one person across Slack and Telegram: /link joins her
// identities, /handoff binds a Slack thread to her Telegram DM, and she
// approves there a shell call someone else asked for in Slack.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

func TestLinkAndHandoffSlackToTelegram(t *testing.T) {
	tgFake := telegramtest.NewServer(telegramtest.Bot{Token: tgApprovalToken, ID: 900, Username: "engineer_bot"})
	t.Cleanup(tgFake.Close)
	var tg *telegram.Adapter
	r := startApproval(t, nil, nil, func(r *approvalRig) {
		r.policy = func(o *core.Options) { o.Owners, o.SelfApprove = []core.ActorID{slackActor(slackAlice)}, false }
		r.more = func(p *proc) []core.Adapter {
			ad, err := telegram.New(telegram.Options{Name: "engineer", Bot: "engineer", Token: tgApprovalToken, APIEndpoint: tgFake.URL(),
				DMPolicy: telegram.DMPairing, Bots: p.eng.Bots(), Engine: p.eng, Cursors: telegram.StoreCursors(p.st)})
			if err != nil {
				t.Fatal(err)
			}
			tg = ad
			return []core.Adapter{ad}
		}
	})
	waitFor(t, "the Telegram adapter to start", func() bool { _, ok := tg.Self(); return ok })
	push := func(update []byte) {
		t.Helper()
		id, err := tgFake.PushUpdate(tgApprovalToken, update)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tgFake.WaitConfirmed(ctx, tgApprovalToken, id+1); err != nil {
			t.Fatalf("update %d not confirmed: %v", id, err)
		}
	}
	toAlice := func(substr string) []string {
		var out []string
		for _, c := range tgFake.Calls("sendMessage") {
			if c.Params["chat_id"] == fmt.Sprint(tgAlice.ID) && strings.Contains(c.Params["text"], substr) {
				out = append(out, c.Params["text"])
			}
		}
		return out
	}

	// Alice links her Telegram account to her Slack one.
	r.dm(t, slackAlice, "D0ALICE01", "1767225900.000100", "link")
	m := regexp.MustCompile(`/link ([A-Z0-9]{8}) `).FindStringSubmatch(strings.Join(r.postedTo(t, "D0ALICE01", 1), "\n"))
	if m == nil {
		t.Fatalf("no link code in %q", r.postedTo(t, "D0ALICE01", 1))
	}
	push(tgDM(501, tgAlice, "/link "+m[1]))
	if got := toAlice("Linked: " + string(slackActor(slackAlice)) + ", telegram:1001"); len(got) != 1 {
		t.Fatalf("telegram answers %q, want Linked", toAlice(""))
	}

	// She hands a Slack thread off to her Telegram DM.
	r.say(t, slackAlice, slackRoot, "", "@engineer hello there")
	r.idle()
	r.post(t, "C0TEST001", slackAlice, "1767225601.000100", slackRoot, "<@U0TESTBOT> handoff telegram")
	if notes := r.ephemerals(t, slackAlice, 1); len(notes) != 1 || !strings.Contains(notes[0], "Handed off") {
		t.Fatalf("alice's notices %q", notes)
	}
	r.idle()
	if got := toAlice("continues in"); len(got) != 1 {
		t.Fatalf("the DM got %q, want the hand-off notice once", toAlice(""))
	}

	// Bob asks for the shell in the Slack thread: the question reaches both, and
	// Alice approves it from Telegram.
	r.say(t, slackBob, "1767225602.000100", slackRoot, "@engineer please run the script")
	r.idle()
	q := r.allQuestions(t)
	if len(q) != 1 || len(q[0].Posts) != 2 {
		t.Fatalf("questions %+v, want one posted in Slack and Telegram", q)
	}
	var tgPost core.QuestionPost
	for _, p := range q[0].Posts {
		if strings.HasPrefix(string(p.Account), "telegram/") {
			tgPost = p
		}
	}
	var msgID int64
	fmt.Sscan(tgPost.PlatformID, &msgID)
	push(telegramtest.CallbackUpdate("cb-alice", tgAlice, tgAlice.ID, msgID, fmt.Sprintf("q:%s:%d", q[0].Token, core.ChoiceApprove)))
	r.idle()
	if n := r.ran(t); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	if got := toAlice("Done: the script ran."); len(got) != 1 {
		t.Fatalf("the reply reached the Telegram DM %d times, want once: %q", len(got), toAlice(""))
	}
	if !r.replied(slackRoot, "Done: the script ran.") {
		t.Fatal("the reply is not in the Slack thread")
	}
}
