package e2e

// End-to-end tests on the real engine (core over bbolt, the real Feishu adapter in
// webhook mode, the fake Open API) of two promises: a reply to a message a bot
// posted continues that bot's thread (a reply, a post_message note, a question),
// and "/new" is answered without a model call and survives a restart.

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// startFsProc runs the Feishu app "acme" (bot engineer, webhook mode) with agent
// over the database file db, against fake.
func startFsProc(t *testing.T, fake *feishutest.Server, db string, agent core.Agent) *fsmRig {
	t.Helper()
	return startFeishu(t, fake, db, feishu.ModeWebhook, core.Options{Agent: agent})
}

// TestFeishuReplyToBotMessageJoinsItsThread: in a p2p chat, after /new has moved
// the chat on to a new dialog, a quote reply to the bot's answer, to its
// post_message note, or to its question card of the older dialog joins that
// dialog's thread, not the current one; in a group topic, after "@bot /new", a
// reply to the bot's note of the older thread does the same.
func TestFeishuReplyToBotMessageJoinsItsThread(t *testing.T) {
	fake := feishutest.New(t)
	agent := &noteAgent{}
	p := startFsProc(t, fake, filepath.Join(t.TempDir(), "openbot.db"), agent)

	p.send(dm("om_d1", "first task, with a note please"))
	note := p.sent("progress note for: first task")
	answer := p.sent("engineer on it")
	p.send(dm("om_d2", "second task, ask me"))
	question := p.sent("Which environment?")
	p.send(dm("om_d3", "/new"))
	p.send(dm("om_d4", "third task"))
	first, second, third := p.threadOf("first task"), p.threadOf("second task"), p.threadOf("third task")
	if first != second || third == first {
		t.Fatalf("threads: first %d, second %d, third %d; want one dialog, then a new one after /new", first, second, third)
	}

	// Feishu sets parent_id to the message replied to, root_id to the chain's root.
	reply := func(id, text string, to feishutest.Message) {
		ev := dm(id, text)
		ev.ParentID, ev.RootID = to.ID, to.ReplyTo
		if ev.RootID == "" {
			ev.RootID = to.ID
		}
		p.send(ev)
	}
	reply("om_r1", "about your note", note)
	reply("om_r2", "about your answer", answer)
	reply("om_r3", "staging", question)
	for _, text := range []string{"about your note", "about your answer", "staging"} {
		if got := p.threadOf(text); got != first {
			t.Errorf("reply %q went to thread %d, want the bot message's thread %d (current dialog %d)", text, got, first, third)
		}
	}

	// Group topic: "@bot /new" moves the topic on; a reply to the older note still
	// joins the older thread, a plain message in the topic the new one.
	bot := []feishutest.Mention{feishutest.BotMention("@_user_1")}
	p.send(feishutest.MessageEvent{MessageID: "om_g1", Text: "@_user_1 group task, with a note", Mentions: bot})
	gnote := p.sent("progress note for: @engineer group task")
	p.send(feishutest.MessageEvent{MessageID: "om_g2", RootID: "om_g1", ParentID: "om_g1", Text: "@_user_1 /new", Mentions: bot})
	p.send(feishutest.MessageEvent{MessageID: "om_g3", RootID: "om_g1", ParentID: "om_g1", Text: "plain topic message"})
	p.send(feishutest.MessageEvent{MessageID: "om_g4", RootID: "om_g1", ParentID: gnote.ID, Text: "reply to the group note"})
	g1, g3, g4 := p.threadOf("group task"), p.threadOf("plain topic message"), p.threadOf("reply to the group note")
	if g3 == g1 || g4 != g1 {
		t.Errorf("group threads: task %d, after /new %d, reply to the note %d; want the reply in the task's thread and the plain message in a new one", g1, g3, g4)
	}
}

// TestFeishuNewSurvivesRestart: a bare "/new" in a p2p chat and "@bot /new" in a
// group topic are confirmed at once without a model call; the process restarts
// (store reopened, new engine and adapter) before the next message, which still
// starts a new thread in each.
func TestFeishuNewSurvivesRestart(t *testing.T) {
	fake := feishutest.New(t)
	db := filepath.Join(t.TempDir(), "openbot.db")
	agent := &noteAgent{}
	p := startFsProc(t, fake, db, agent)
	bot := []feishutest.Mention{feishutest.BotMention("@_user_1")}

	p.send(dm("om_n1", "old dialog"))
	p.send(feishutest.MessageEvent{MessageID: "om_t1", Text: "@_user_1 old topic thread", Mentions: bot})
	runs := agent.count()
	p.send(dm("om_n2", "/new"))
	p.send(feishutest.MessageEvent{MessageID: "om_t2", RootID: "om_t1", ParentID: "om_t1", Text: "@_user_1 /new", Mentions: bot})
	if m := p.replyTo("om_n2"); m.InThread || !strings.Contains(m.Text(), "next message here starts a new conversation") {
		t.Errorf("p2p /new confirmation %+v %q", m, m.Text())
	}
	if m := p.replyTo("om_t2"); !m.InThread || !strings.Contains(m.Text(), "next message here starts a new conversation") {
		t.Errorf("group /new confirmation %+v %q, want it inside the topic", m, m.Text())
	}
	if got := agent.count(); got != runs {
		t.Errorf("/new made %d model runs, want none", got-runs)
	}
	p.stop()

	p = startFsProc(t, fake, db, agent)
	p.send(dm("om_n3", "fresh dialog"))
	p.send(feishutest.MessageEvent{MessageID: "om_t3", RootID: "om_t1", ParentID: "om_t1", Text: "fresh topic thread"})
	if a, b := p.threadOf("old dialog"), p.threadOf("fresh dialog"); a == b {
		t.Errorf("p2p: the message after /new and a restart stayed in thread %d", a)
	}
	if a, b := p.threadOf("old topic thread"), p.threadOf("fresh topic thread"); a == b {
		t.Errorf("group: the message after /new and a restart stayed in thread %d", a)
	}
	// The flag is used up: the next message continues the fresh dialog.
	p.send(dm("om_n4", "still fresh"))
	if a, b := p.threadOf("fresh dialog"), p.threadOf("still fresh"); a != b {
		t.Errorf("the message after the fresh one went to thread %d, want %d", b, a)
	}
}

// TestFeishuStaleSignedRequestStartsNoRun: a correctly encrypted and signed
// @mention whose X-Lark-Request-Timestamp is 30 days old (a captured request
// replayed) is refused, stores nothing and starts no run; the same event with a
// fresh timestamp is answered.
func TestFeishuStaleSignedRequestStartsNoRun(t *testing.T) {
	fake := feishutest.New(t)
	agent := &noteAgent{}
	p := startFsProc(t, fake, filepath.Join(t.TempDir(), "openbot.db"), agent)
	ev := feishutest.MessageEvent{MessageID: "om_replayed", Text: "@_user_1 deploy to prod", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}
	req, err := feishutest.WebhookRequestAt(p.hook.URL+"/feishu/acme/events", ev.JSON(), feishutest.EncryptKey, time.Now().Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("30-day-old signed request: status %d, want 401", res.StatusCode)
	}
	p.idle()
	var threads int
	p.view(func(tx core.ReadTx) error {
		ths, err := tx.Threads(0)
		threads = len(ths)
		return err
	})
	if threads != 0 || agent.count() != 0 || len(fake.Messages()) != 0 {
		t.Fatalf("stale request: %d threads, %d runs, %d messages sent; want none", threads, agent.count(), len(fake.Messages()))
	}
	p.send(ev)
	p.sent("engineer on it")
	if agent.count() != 1 {
		t.Errorf("fresh request: %d runs, want 1", agent.count())
	}
}
