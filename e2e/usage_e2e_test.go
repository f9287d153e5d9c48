package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// putUsage writes one ledger entry for the run of job, as a model call would.
func putUsage(t *testing.T, st core.Store, job *core.Job, in, out int64) {
	t.Helper()
	err := st.Update(context.Background(), func(tx core.Tx) error {
		_, _, err := tx.PutUsage(core.UsageEntry{Key: core.UsageKey(job.Run.ID, 1), At: time.Now(), Bot: job.Bot.Handle,
			Thread: job.Thread.ID, Run: job.Run.ID, Model: "m", InputTokens: in, OutputTokens: out, CostMicros: 1234})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSlackUsageCommand: /usage in a DM shows this thread and the bot today
// and this month from the ledger, privately.
func TestSlackUsageCommand(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767226200.000100", "", "hello")
	putUsage(t, r.st, r.lastRun(t, "chief_of_staff"), 700, 300)
	code, body := r.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/usage", TriggerID: "tu1"})
	if code != 200 {
		t.Fatalf("/usage = %d %s", code, body)
	}
	for _, want := range []string{"This thread: 1000 tokens, 0.001234 in 1 calls", "@chief_of_staff today: 1000 tokens", "@chief_of_staff this month: 1000 tokens", "ephemeral"} {
		if !strings.Contains(body, want) {
			t.Errorf("/usage reply lacks %q: %s", want, body)
		}
	}
}

// TestSlackUsageInChannelThread: a slash command names no Slack thread, so
// "/usage" in a channel says how to ask in a thread; "@app usage" replied in a
// channel thread answers privately, once for Slack's two copies, with that
// thread's figures (not another thread's) and without a run.
func TestSlackUsageInChannelThread(t *testing.T) {
	r := startSlack(t, nil)
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST001", "1767226300.000100", "", "<@U0TESTBOT> @engineer fix the build"))
	r.idle()
	putUsage(t, r.st, r.lastRun(t, "engineer"), 700, 300)
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST001", "1767226400.000100", "", "<@U0TESTBOT> @engineer other topic"))
	r.idle()
	putUsage(t, r.st, r.lastRun(t, "engineer"), 5, 5)

	code, body := r.command(t, slacktest.Command{Channel: "C0TEST001", User: "U0TEST001", Command: "/usage", TriggerID: "tu2"})
	if code != 200 || !strings.Contains(body, `reply \"usage\" (mentioning the app) in the thread`) || !strings.Contains(body, "All bots today: 1010 tokens") {
		t.Fatalf("/usage in a channel = %d %s", code, body)
	}
	for _, typ := range []string{"app_mention", "message"} {
		r.post(t, slackEvent(t, typ, "C0TEST001", "channel", "U0TEST001", "1767226301.000100", "1767226300.000100", "<@U0TESTBOT> usage"))
	}
	r.idle()
	waitFake(t, r.fake, func(s *slacktest.Server) bool { return ephemeralTo(s, "U0TEST001", "This thread: 1000 tokens") })
	r.idle()
	var answers []string
	for _, c := range r.fake.CallsTo("chat.postEphemeral") {
		answers = append(answers, c.Form.Get("text"))
		if c.Form.Get("thread_ts") != "1767226300.000100" {
			t.Errorf("usage answer outside the thread: thread_ts %q", c.Form.Get("thread_ts"))
		}
	}
	if len(answers) != 1 {
		t.Errorf("usage answered %d times, want 1: %q", len(answers), answers)
	}
	if n := len(r.agent.runs("engineer")) + len(r.agent.runs("chief_of_staff")); n != 2 {
		t.Errorf("runs = %d, want 2 (usage is no run)", n)
	}
}

// TestTelegramUsageCommand: /usage in a private chat answers with the figures
// of the chat's thread and the account's bot, without a run.
func TestTelegramUsageCommand(t *testing.T) {
	r := startTelegram(t, "engineer")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dm := func(update int64, text, entities string) {
		t.Helper()
		body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":4242,"is_bot":false,"first_name":"Alice"},"chat":{"id":4242,"type":"private"},"date":1767225600,"text":%q,"entities":[%s]}}`, update, 20+update, text, entities)
		if _, err := r.fake.PushUpdate("tok-engineer", []byte(body)); err != nil {
			t.Fatal(err)
		}
		if err := r.fake.WaitConfirmed(ctx, "tok-engineer", update+1); err != nil {
			t.Fatal(err)
		}
		r.idle()
	}
	dm(1, "hello", "")
	threads, err := r.eng.Threads(ctx, 0)
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %v, %v", threads, err)
	}
	putUsage(t, r.st, &core.Job{Run: core.Run{ID: 1}, Bot: core.BotProfile{Handle: "engineer"}, Thread: threads[0]}, 40, 2)
	dm(2, "/usage", `{"type":"bot_command","offset":0,"length":6}`)
	if n := r.agent.runs["engineer"]; n != 1 {
		t.Errorf("engineer ran %d times, want 1 (/usage is no run)", n)
	}
	calls := r.fake.Calls("sendMessage")
	last := calls[len(calls)-1].Params["text"]
	for _, want := range []string{"This thread: 42 tokens", "@engineer today: 42 tokens", "@engineer this month: 42 tokens"} {
		if !strings.Contains(last, want) {
			t.Errorf("/usage answer lacks %q: %q", want, last)
		}
	}
}

// TestFeishuUsageCommand: /usage in a p2p chat answers with the figures of the
// chat's thread and the app's bot, without a run.
func TestFeishuUsageCommand(t *testing.T) {
	r := startFeishuFixed(t, feishu.ModeWebhook)
	r.deliver(feishutest.MessageEvent{MessageID: "om_usage_hello0001", ChatID: feishutest.P2PChat, ChatType: "p2p", Text: "hello"}.JSON())
	r.idle()
	id := r.threadOf("hello")
	putUsage(t, r.st, &core.Job{Run: core.Run{ID: 1}, Bot: core.BotProfile{Handle: "engineer"}, Thread: core.Thread{ID: id}}, 90, 10)
	r.deliver(feishutest.MessageEvent{MessageID: "om_usage_cmd00001", ChatID: feishutest.P2PChat, ChatType: "p2p", Text: "/usage"}.JSON())
	r.idle()
	ms, err := r.fake.WaitMessages(r.ctx(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.runs(); n != 1 {
		t.Errorf("runs = %d, want 1 (/usage is no run)", n)
	}
	last := ms[len(ms)-1].Text()
	for _, want := range []string{"This thread: 100 tokens", "@engineer today: 100 tokens", "@engineer this month: 100 tokens"} {
		if !strings.Contains(last, want) {
			t.Errorf("/usage answer lacks %q: %q", want, last)
		}
	}
}
