package e2e

// End-to-end tests of the Feishu adapter on the real engine: core.New over bbolt with a
// scripted agent (fixedAgent), the real Feishu adapter and the fake Open API, in
// webhook mode (encrypted, signed requests to the mounted handler) and over the
// long connection.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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

// fsmRig is the engine with a fixedAgent and one Feishu app ("acme", bot engineer).
type fsmRig struct {
	t     *testing.T
	mode  string
	fake  *feishutest.Server
	st    *bolt.Store
	eng   *core.Engine
	agent *fixedAgent
	hook  *httptest.Server
}

func startFeishuFixed(t *testing.T, mode string) *fsmRig {
	t.Helper()
	r := &fsmRig{t: t, mode: mode, fake: feishutest.New(t), agent: &fixedAgent{runs: map[string]int{}}}
	var err error
	r.st, err = bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.eng, err = core.New(core.Options{Store: r.st, Agent: r.agent, Bots: e2eTeam, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := feishutest.EncryptKey
	if mode == feishu.ModeWebsocket {
		key = ""
	}
	ad, err := feishu.New(feishu.Options{Name: "acme", Bot: "engineer", AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
		Mode: mode, VerificationToken: feishutest.VerificationToken, EncryptKey: key, BaseURL: r.fake.URL(),
		AllowUsers: []string{feishutest.AliceOpenID}, Bots: e2eTeam, Engine: r.eng})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.eng.AddAdapter(ad); err != nil {
		t.Fatal(err)
	}
	var stop func()
	r.hook, stop = runWithAdapter(r.eng, ad)
	t.Cleanup(func() {
		stop()
		r.st.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for ad.BotOpenID() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the Feishu adapter never learned its bot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if mode == feishu.ModeWebsocket {
		if err := r.fake.WaitConnections(r.ctx(), 1); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *fsmRig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	r.t.Cleanup(cancel)
	return ctx
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
	if err := r.post(payload); err != nil {
		r.t.Fatal(err)
	}
}

// post sends payload to the events URL, encrypted and signed; safe from any
// goroutine.
func (r *fsmRig) post(payload []byte) error {
	return feishuPost(r.hook.URL+"/feishu/acme/events", payload)
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

func (r *fsmRig) idle() {
	r.t.Helper()
	if err := r.eng.WaitIdle(r.ctx()); err != nil {
		r.t.Fatalf("not idle: %v", err)
	}
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

// threadOf returns the openbot thread holding the message whose text contains
// text, and how many stored messages contain it.
func (r *fsmRig) threadOf(text string) (core.ThreadID, int) {
	var (
		id core.ThreadID
		n  int
	)
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error {
		ths, _ := tx.Threads(0)
		for _, th := range ths {
			ms, _ := tx.Messages(th.ID, 0, 0)
			for _, m := range ms {
				if strings.Contains(m.Text, text) {
					id = th.ID
					n++
				}
			}
		}
		return nil
	})
	return id, n
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
			if _, n := r.threadOf("please summarise today's deploy failures"); n != 1 {
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
			if err := r.post(e.JSON()); err != nil {
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

			a, _ := r.threadOf("look at the flaky test")
			b, nb := r.threadOf("it fails on arm64 only")
			if a == 0 || b != a || nb != 1 {
				t.Errorf("mention in thread %d, topic reply in thread %d (stored %d times); want the same thread, once", a, b, nb)
			}
			if _, n := r.threadOf("unrelated chatter"); n != 0 {
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
