package e2e

// End-to-end tests of the Feishu adapter on the real engine: core.New over bbolt with a
// scripted agent (fixedAgent), the real Feishu adapter and the fake Open API, in
// webhook mode (encrypted, signed requests to the mounted handler) and over the
// long connection.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// fsmRig is one openbot process with one Feishu app ("acme", bot engineer,
// Alice allowed, /new flags in the store) on a fake Open API.
type fsmRig struct {
	*proc
	mode  string
	fake  *feishutest.Server
	agent *fixedAgent // startFeishuFixed's
}

// startFeishu runs the engine from opts over db ("" for a new store) with the
// Feishu app in mode on fake; more adjusts the app's options.
func startFeishu(t *testing.T, fake *feishutest.Server, db, mode string, opts core.Options, more ...func(*feishu.Options)) *fsmRig {
	t.Helper()
	r := &fsmRig{mode: mode, fake: fake}
	r.proc = openProc(t, db, opts)
	fo := feishuOptions(fake, r.proc, "engineer", mode)
	for _, m := range more {
		m(&fo)
	}
	conns := fake.Connections()
	startFeishuApp(t, r.proc, fo)
	if mode == feishu.ModeWebsocket {
		if err := fake.WaitConnections(r.ctx(), conns+1); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// feishuOptions are the options of the rigs' Feishu app "acme" on fake for bot
// in mode, Alice allowed, running in p.
func feishuOptions(fake *feishutest.Server, p *proc, bot, mode string) feishu.Options {
	key := feishutest.EncryptKey
	if mode == feishu.ModeWebsocket {
		key = "" // the long connection is authenticated when it is set up
	}
	return feishu.Options{Name: "acme", Bot: bot, AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
		Mode: mode, VerificationToken: feishutest.VerificationToken, EncryptKey: key, BaseURL: fake.URL(),
		AllowUsers: []string{feishutest.AliceOpenID}, Bots: p.eng.Bots(), Engine: p.eng, Cursors: core.StoreCursors(p.st)}
}

// startFeishuApp runs the app of fo in p and waits until it knows its bot.
func startFeishuApp(t *testing.T, p *proc, fo feishu.Options) {
	t.Helper()
	ad, err := feishu.New(fo)
	if err != nil {
		t.Fatal(err)
	}
	p.run(ad)
	waitFor(t, "the Feishu adapter to learn its bot", func() bool { return ad.BotOpenID() != "" })
}

// startFeishuFixed is startFeishu with a fixedAgent on a new fake.
func startFeishuFixed(t *testing.T, mode string) *fsmRig {
	t.Helper()
	agent := &fixedAgent{runs: map[string]int{}}
	r := startFeishu(t, feishutest.New(t), "", mode, core.Options{Agent: agent})
	r.agent = agent
	return r
}

// deliver hands one event envelope to the adapter as the platform does in the
// rig's mode and checks that it was acknowledged (HTTP 200, or an ack with 200).
func (r *fsmRig) deliver(payload []byte) {
	r.t.Helper()
	if r.mode == feishu.ModeWebsocket {
		id, err := r.fake.PushEvent(r.ctx(), payload, 1)
		if err != nil {
			r.t.Fatal(err)
		}
		if ack, err := r.fake.WaitAck(r.ctx(), id); err != nil || ack.Code != 200 {
			r.t.Fatalf("ack %+v, %v", ack, err)
		}
		return
	}
	if err := feishuPost(r.hook.URL+"/feishu/acme/events", payload); err != nil {
		r.t.Fatal(err)
	}
}

// feishuPost POSTs payload to url, encrypted and signed as Feishu does, and
// requires a 200; safe from any goroutine.
func feishuPost(url string, payload []byte) error {
	code, body, err := feishuCall(url, payload)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("webhook answered HTTP %d %s", code, body)
	}
	return err
}

// feishuCall POSTs payload to url, encrypted and signed as Feishu does, and
// returns the answer.
func feishuCall(url string, payload []byte) (int, []byte, error) {
	req, err := feishutest.WebhookRequest(url, payload, feishutest.EncryptKey)
	if err != nil {
		return 0, nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

func (r *fsmRig) runs() int {
	r.agent.mu.Lock()
	defer r.agent.mu.Unlock()
	n := 0
	for _, c := range r.agent.runs {
		n += c
	}
	return n
}

// send posts ev (encrypted, signed) and waits until the engine is idle.
func (r *fsmRig) send(ev feishutest.MessageEvent) {
	r.t.Helper()
	r.post(ev)
	r.idle()
}

// post posts ev (encrypted, signed) without waiting for the engine.
func (r *fsmRig) post(ev feishutest.MessageEvent) {
	r.t.Helper()
	if err := feishuPost(r.hook.URL+"/feishu/acme/events", ev.JSON()); err != nil {
		r.t.Fatalf("%s: %v", ev.MessageID, err)
	}
}

// waitMessage waits until the app sent a message that match accepts and
// returns it.
func (r *fsmRig) waitMessage(what string, match func(feishutest.Message) bool) feishutest.Message {
	r.t.Helper()
	m, err := r.fake.WaitMessage(r.ctx(), match)
	if err != nil {
		var texts []string
		for _, m := range r.fake.Messages() {
			texts = append(texts, m.Text())
		}
		r.t.Fatalf("no %s; sent: %q", what, texts)
	}
	return m
}

// sent waits for the message the app posted whose text (or card) contains
// substr and returns it.
func (r *fsmRig) sent(substr string) feishutest.Message {
	r.t.Helper()
	return r.waitMessage("message containing "+substr, func(m feishutest.Message) bool {
		return strings.Contains(m.Text(), substr) || strings.Contains(m.Content, substr)
	})
}

// replyTo waits for the app's reply to message id and returns it.
func (r *fsmRig) replyTo(id string) feishutest.Message {
	r.t.Helper()
	return r.waitMessage("reply to "+id, func(m feishutest.Message) bool { return m.ReplyTo == id })
}

// feishuFixture reads a payload of the adapter's testdata, compacted as the
// platform sends it.
func feishuFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "adapters", "feishu", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

const fsmAtBotMsg = "om_d0b6b951d313294318002dfa2c33f529" // the fixture group @mention

// TestFeishuRedeliveryAnsweredOnce: the fixture group @mention, then its fixture
// redelivery (byte-identical, same event_id), then a redelivery with a new
// event_id and the same message_id: one stored message, one run, one threaded
// reply, in both modes.
func TestFeishuRedeliveryAnsweredOnce(t *testing.T) {
	for _, mode := range []string{feishu.ModeWebhook, feishu.ModeWebsocket} {
		t.Run(mode, func(t *testing.T) {
			r := startFeishuFixed(t, mode)
			first := feishuFixture(t, "event_v2_im_message_receive_group_at_bot.json")
			again := feishuFixture(t, "event_v2_im_message_receive_group_at_bot.redelivery.json")
			newID := bytes.Replace(again, []byte("d0c77bc2374fe226a28da071812638e5"), []byte("0000000000000000000000000000beef"), 1)
			if bytes.Equal(newID, again) {
				t.Fatal("the redelivery fixture has no event_id to replace")
			}
			r.deliver(first)
			r.idle()
			r.deliver(again)
			r.deliver(newID)
			r.idle()

			if n := r.runs(); n != 1 {
				t.Errorf("runs = %d, want 1", n)
			}
			if n := len(r.storedWith("please summarise today's deploy failures")); n != 1 {
				t.Errorf("the message is stored %d times, want 1", n)
			}
			ms := r.fake.Messages()
			if len(ms) != 1 {
				t.Fatalf("sent %d messages, want exactly one reply: %+v", len(ms), ms)
			}
			if m := ms[0]; m.Kind != "reply" || m.ReplyTo != fsmAtBotMsg || !m.InThread || !strings.Contains(m.Text(), "engineer on it") {
				t.Errorf("reply %+v (text %q): want a threaded reply to the mention", m, m.Text())
			}
		})
	}
}

// TestFeishuConcurrentRedeliveryAnsweredOnce: the same message delivered twice at
// once under two event_ids (the platform retrying while the first request is still
// being handled) is still stored and answered once.
func TestFeishuConcurrentRedeliveryAnsweredOnce(t *testing.T) {
	r := startFeishuFixed(t, feishu.ModeWebhook)
	ev := feishutest.MessageEvent{MessageID: "om_more_race_0001", Text: "@_user_1 race me", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}
	var wg sync.WaitGroup
	for _, id := range []string{"ev-race-a", "ev-race-b", "ev-race-c"} {
		e := ev
		e.EventID = id
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := feishuPost(r.hook.URL+"/feishu/acme/events", e.JSON()); err != nil {
				t.Errorf("%s: %v", e.EventID, err)
			}
		}()
	}
	wg.Wait()
	r.idle()
	if n := r.runs(); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
	if ms := r.fake.Messages(); len(ms) != 1 {
		t.Errorf("sent %d messages, want 1: %+v", len(ms), ms)
	}
}

// TestFeishuTopicReplyWithoutMentionContinues: a top-level @mention starts a topic
// thread; a later message in that topic (root_id and thread_id, no mention) is
// stored in the same openbot thread and answered in the topic, while an
// unmentioned message in a topic openbot does not know starts nothing.
func TestFeishuTopicReplyWithoutMentionContinues(t *testing.T) {
	for _, mode := range []string{feishu.ModeWebhook, feishu.ModeWebsocket} {
		t.Run(mode, func(t *testing.T) {
			r := startFeishuFixed(t, mode)
			const root, follow, stray = "om_more_topic_root01", "om_more_topic_plain1", "om_more_other_plain1"
			r.deliver(feishutest.MessageEvent{MessageID: root, Text: "@_user_1 look at the flaky test",
				Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}.JSON())
			r.idle()
			ms := r.fake.Messages()
			if len(ms) != 1 || ms[0].ReplyTo != root || !ms[0].InThread {
				t.Fatalf("after the mention: %+v, want one threaded reply to %s", ms, root)
			}
			// Bob answers in the topic, replying to the bot's message, without a mention.
			r.deliver(feishutest.MessageEvent{MessageID: follow, RootID: root, ParentID: ms[0].ID, ThreadID: "omt_more_topic_01",
				Sender: feishutest.BobOpenID, Text: "it fails on arm64 only"}.JSON())
			// An unmentioned message in a topic openbot never saw.
			r.deliver(feishutest.MessageEvent{MessageID: stray, RootID: "om_more_unknown_root", ThreadID: "omt_more_topic_02",
				Sender: feishutest.BobOpenID, Text: "unrelated chatter"}.JSON())
			r.idle()

			a, b := r.threadOf("look at the flaky test"), r.threadOf("it fails on arm64 only")
			nb := len(r.storedWith("it fails on arm64 only"))
			if a == 0 || b != a || nb != 1 {
				t.Errorf("mention in thread %d, topic reply in thread %d (stored %d times); want the same thread, once", a, b, nb)
			}
			if n := len(r.storedWith("unrelated chatter")); n != 0 {
				t.Errorf("the message in an unknown topic was stored %d times", n)
			}
			if n := r.runs(); n != 2 {
				t.Errorf("runs = %d, want 2 (the mention, the topic reply)", n)
			}
			ms = r.fake.Messages()
			if len(ms) != 2 {
				t.Fatalf("sent %d messages, want 2: %+v", len(ms), ms)
			}
			if m := ms[1]; m.Kind != "reply" || !m.InThread || (m.ReplyTo != follow && m.ReplyTo != root) || !strings.Contains(m.Text(), "engineer on it") {
				t.Errorf("second reply %+v (text %q): want a reply in the topic", m, m.Text())
			}
		})
	}
}

// dm is a Feishu direct message event with id and text in the fake's p2p chat.
func dm(id, text string) feishutest.MessageEvent {
	return feishutest.MessageEvent{MessageID: id, ChatID: feishutest.P2PChat, ChatType: "p2p", Text: text}
}

// sends counts the messages the adapter sent to the fake Feishu (reactions aside).
func sends(f *feishutest.Server) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == http.MethodPost && strings.HasPrefix(c.Path, "/open-apis/im/v1/messages") && !strings.Contains(c.Path, "/reactions") {
			n++
		}
	}
	return n
}
