package e2e

// End-to-end tests on the real engine (core over bbolt, the real Feishu adapter in
// webhook mode, the fake Open API) of two promises: a reply to a message a bot
// posted continues that bot's thread (a reply, a post_message note, a question),
// and "/new" is answered without a model call and survives a restart.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
	"openbot/store/bolt"
)

// fsProc is one openbot process over a database file: engine, Feishu app "acme"
// (bot engineer, webhook mode) with its /new flags in the store.
type fsProc struct {
	t      *testing.T
	fake   *feishutest.Server
	st     *bolt.Store
	eng    *core.Engine
	hook   *httptest.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startFsProc(t *testing.T, fake *feishutest.Server, db string, agent core.Agent) *fsProc {
	t.Helper()
	p := &fsProc{t: t, fake: fake}
	var err error
	if p.st, err = bolt.Open(db, bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	if p.eng, err = core.New(core.Options{Store: p.st, Agent: agent, Bots: e2eTeam, ShutdownGrace: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ad, err := feishu.New(feishu.Options{Name: "acme", Bot: "engineer", AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
		Mode: feishu.ModeWebhook, VerificationToken: feishutest.VerificationToken, EncryptKey: feishutest.EncryptKey,
		BaseURL: fake.URL(), AllowUsers: []string{feishutest.AliceOpenID}, Bots: e2eTeam, Engine: p.eng,
		Cursors: core.StoreCursors(p.st)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.eng.AddAdapter(ad); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ad.MountHTTP(mux)
	p.hook = httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(2)
	go func() { defer p.wg.Done(); _ = p.eng.Run(ctx) }()
	<-p.eng.Ready()
	go func() { defer p.wg.Done(); _ = ad.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for ad.BotOpenID() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the Feishu adapter never learned its bot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() { p.stop() })
	return p
}

// stop cancels the process, waits for it and closes its store; idempotent.
func (p *fsProc) stop() {
	if p.cancel == nil {
		return
	}
	p.hook.Close()
	p.cancel()
	p.cancel = nil
	p.wg.Wait()
	if err := p.st.Close(); err != nil {
		p.t.Error(err)
	}
}

func (p *fsProc) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	p.t.Cleanup(cancel)
	return ctx
}

// send posts ev (encrypted, signed) and waits until the engine is idle.
func (p *fsProc) send(ev feishutest.MessageEvent) {
	p.t.Helper()
	req, err := feishutest.WebhookRequest(p.hook.URL+"/feishu/acme/events", ev.JSON(), feishutest.EncryptKey)
	if err != nil {
		p.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		p.t.Fatalf("%s: webhook answered %d", ev.MessageID, res.StatusCode)
	}
	if err := p.eng.WaitIdle(p.ctx()); err != nil {
		p.t.Fatal(err)
	}
}

// sent waits for the message the app posted whose text (or card) contains substr
// and returns it.
func (p *fsProc) sent(substr string) feishutest.Message {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range p.fake.Messages() {
			if strings.Contains(m.Text(), substr) || strings.Contains(m.Content, substr) {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.t.Fatalf("no message containing %q; sent %d", substr, len(p.fake.Messages()))
	return feishutest.Message{}
}

// replyTo waits for the app's reply to message id and returns it.
func (p *fsProc) replyTo(id string) feishutest.Message {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range p.fake.Messages() {
			if m.ReplyTo == id {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.t.Fatalf("no reply to %s", id)
	return feishutest.Message{}
}

// threadOf returns the thread of the stored message whose text contains text.
func (p *fsProc) threadOf(text string) core.ThreadID {
	p.t.Helper()
	var id core.ThreadID
	_ = p.st.View(context.Background(), func(tx core.ReadTx) error {
		ths, _ := tx.Threads(0)
		for _, th := range ths {
			ms, _ := tx.Messages(th.ID, 0, 0)
			for _, m := range ms {
				if strings.Contains(m.Text, text) {
					id = th.ID
				}
			}
		}
		return nil
	})
	if id == 0 {
		p.t.Fatalf("no stored message contains %q", text)
	}
	return id
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
	if err := p.eng.WaitIdle(p.ctx()); err != nil {
		t.Fatal(err)
	}
	var threads int
	_ = p.st.View(context.Background(), func(tx core.ReadTx) error {
		ths, _ := tx.Threads(0)
		threads = len(ths)
		return nil
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
