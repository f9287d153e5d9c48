package feishu_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

// fakeEngine records Inbounds and mimics core's ingest rules that matter to the
// adapter: a seen DedupKey is a duplicate, an unknown thread without StartThread is
// dropped.
//
// For questions it keeps core's answer rules: an unknown token or choice is
// AnswerUnknown, a clicker not in approvers AnswerForbidden, a decided question
// AnswerDecided, else the first answer is stored and AnswerAccepted.
type fakeEngine struct {
	mu        sync.Mutex
	ins       adaptertest.Log[core.Inbound]
	seen      map[string]bool
	threads   map[string]bool
	fail      error
	answers   adaptertest.Log[core.Answer]
	questions map[string]*core.Question // by token
	approvers map[core.ActorID]bool
	answerErr error
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{seen: map[string]bool{}, threads: map[string]bool{},
		questions: map[string]*core.Question{}, approvers: map[core.ActorID]bool{}}
}

func (e *fakeEngine) Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answers.Add(a)
	if e.answerErr != nil {
		return core.AnswerResult{}, e.answerErr
	}
	q := e.questions[a.Token]
	if q == nil || a.Choice < 0 || a.Choice >= len(q.Options()) {
		return core.AnswerResult{Outcome: core.AnswerUnknown}, nil
	}
	if a.Actor == "" || !e.approvers[a.Actor] {
		return core.AnswerResult{Outcome: core.AnswerForbidden, Question: *q}, nil
	}
	if q.Status != core.QuestionPending {
		return core.AnswerResult{Outcome: core.AnswerDecided, Question: *q}, nil
	}
	q.Status, q.Choice, q.Answer = core.QuestionAnswered, a.Choice, q.Options()[a.Choice]
	q.AnsweredBy, q.AnsweredByName, q.AnsweredVia = a.Actor, a.Name, a.Account
	return core.AnswerResult{Outcome: core.AnswerAccepted, Question: *q}, nil
}

func (e *fakeEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail != nil {
		return core.IngestResult{}, e.fail
	}
	n := e.ins.Add(in)
	if e.seen[in.DedupKey] {
		return core.IngestResult{Duplicate: true}, nil
	}
	e.seen[in.DedupKey] = true
	if !e.threads[in.ThreadKey] && !in.StartThread {
		return core.IngestResult{Dropped: true}, nil
	}
	e.threads[in.ThreadKey] = true
	return core.IngestResult{Thread: 1, Message: core.MessageID(n)}, nil
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compact re-serialises a pretty fixture the way the platform sends it.
func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

type harness struct {
	t      *testing.T
	clock  core.Clock // the adapter's clock, when the test set one
	srv    *feishutest.Server
	eng    *fakeEngine
	a      *feishu.Adapter
	web    *httptest.Server // the shared listener with MountHTTP
	cancel context.CancelFunc
	done   chan error
}

func bots() []core.BotProfile {
	return []core.BotProfile{{Handle: "engineer", Name: "Engineer"}, {Handle: "reviewer", Name: "Reviewer"}}
}

// newHarness builds an adapter against a fresh fake; edit may change the options.
func newHarness(t *testing.T, edit func(*feishu.Options)) *harness {
	t.Helper()
	h := &harness{t: t, srv: feishutest.New(t), eng: newFakeEngine()}
	opts := feishu.Options{
		Name: "acme", Bot: "engineer", AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
		Mode: feishu.ModeWebhook, VerificationToken: feishutest.VerificationToken, EncryptKey: feishutest.EncryptKey,
		BaseURL: h.srv.URL(), AllowUsers: []string{feishutest.AliceOpenID}, Bots: bots(), Engine: h.eng,
	}
	if edit != nil {
		edit(&opts)
	}
	h.clock = opts.Clock
	a, err := feishu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	mux := http.NewServeMux()
	a.MountHTTP(mux)
	h.web = httptest.NewServer(mux)
	t.Cleanup(h.web.Close)
	return h
}

// run starts Run and waits until the bot's open_id is known; the test's cleanup
// stops it and checks that it returned nil promptly.
func (h *harness) run() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.a.Run(ctx) }()
	h.t.Cleanup(func() { h.stop() })
	deadline := time.Now().Add(10 * time.Second)
	for h.a.BotOpenID() == "" {
		if time.Now().After(deadline) {
			h.t.Fatal("bot open_id never learned")
		}
		select {
		case err := <-h.done:
			h.t.Fatalf("Run returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (h *harness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Error("Run did not return after cancel")
	}
}

// post sends payload to /feishu/acme/<path> as the platform would (encrypted and
// signed with key when key is not empty) and returns the status and body.
func (h *harness) post(path string, payload []byte, key string) (int, string) {
	h.t.Helper()
	now := time.Now()
	if h.clock != nil {
		now = h.clock.Now()
	}
	req, err := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/"+path, payload, key, now)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(req)
}

func (h *harness) do(req *http.Request) (int, string) {
	h.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const (
	atBotMessage = "om_d0b6b951d313294318002dfa2c33f529"
	groupThread  = "feishu:oc_5fc90c2dcb8cb0a515bc34c4552b2895:om_d0b6b951d313294318002dfa2c33f529"
)

func TestWebhookGroupMentionThreadedReply(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	status, body := h.post("events", compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), feishutest.EncryptKey)
	if status != http.StatusOK || !strings.Contains(body, "success") {
		t.Fatalf("status %d body %q", status, body)
	}
	ins := h.eng.ins.All()
	if len(ins) != 1 {
		t.Fatalf("got %d inbounds, want 1", len(ins))
	}
	in := ins[0]
	want := core.Inbound{
		Account: "feishu/acme", Platform: "feishu", DedupKey: "feishu:" + atBotMessage, ThreadKey: groupThread,
		Conversation: core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage), PlatformID: atBotMessage,
		SenderID: core.ActorID("feishu:" + feishutest.AliceOpenID), SenderName: "Alice",
		Text: "@engineer please summarise today's deploy failures", Mentions: []string{"engineer"},
		StartThread: true, DefaultBot: "engineer", Received: time.UnixMilli(1767225600000).UTC(),
	}
	if !inboundEqual(in, want) {
		t.Errorf("inbound\n got %+v\nwant %+v", in, want)
	}

	id, err := h.a.Deliver(ctxT(t), core.Delivery{Outbox: 7, Message: 3, Conversation: in.Conversation, ReplyTo: in.PlatformID,
		Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer", Name: "Engineer"}, Text: "**3** deploys failed"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("sent %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.ID != id || m.Kind != "reply" || m.ReplyTo != atBotMessage || !m.InThread || m.MsgType != "interactive" || m.Text() != "**3** deploys failed" || m.UUID == "" {
		t.Errorf("sent %+v (text %q), id %q", m, m.Text(), id)
	}
}

func inboundEqual(a, b core.Inbound) bool {
	return a.Account == b.Account && a.Platform == b.Platform && a.DedupKey == b.DedupKey && a.ThreadKey == b.ThreadKey &&
		a.Conversation == b.Conversation && a.PlatformID == b.PlatformID && a.SenderID == b.SenderID &&
		a.SenderName == b.SenderName && a.Text == b.Text && slices.Equal(a.Mentions, b.Mentions) &&
		a.MentionsHumans == b.MentionsHumans && a.StartThread == b.StartThread && a.NewThread == b.NewThread &&
		a.DefaultBot == b.DefaultBot && a.Received.Equal(b.Received)
}

func TestGroupThreadReplyAndUnmentioned(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	// Bob's reply in the topic mentions the bot and Alice.
	if s, b := h.post("events", compact(t, fixture(t, "event_v2_im_message_receive_group_thread_reply.json")), feishutest.EncryptKey); s != 200 {
		t.Fatalf("thread reply: %d %s", s, b)
	}
	// A reply in the same topic with no mention continues it, without starting one.
	plain := feishutest.MessageEvent{MessageID: "om_plainreply0001", RootID: atBotMessage, ThreadID: "omt_4b0a5fefc328e6b9", Sender: feishutest.BobOpenID, Text: "also on prod"}
	if s, b := h.post("events", plain.JSON(), feishutest.EncryptKey); s != 200 {
		t.Fatalf("plain reply: %d %s", s, b)
	}
	// Top-level messages without a bot mention are not for openbot.
	for _, f := range []string{"event_v2_im_message_receive_group_no_mention.json", "event_v2_im_message_receive_group_mentions_other_user.json"} {
		if s, b := h.post("events", compact(t, fixture(t, f)), feishutest.EncryptKey); s != 200 {
			t.Fatalf("%s: %d %s", f, s, b)
		}
	}
	ins := h.eng.ins.All()
	if len(ins) != 2 {
		t.Fatalf("got %d inbounds, want 2: %+v", len(ins), ins)
	}
	if in := ins[0]; in.ThreadKey != groupThread || in.Text != "@engineer does this also hit staging? cc @Alice" ||
		!in.StartThread || !slices.Equal(in.Mentions, []string{"engineer"}) || in.MentionsHumans {
		t.Errorf("thread reply inbound %+v", in)
	}
	if ins[0].SenderName != "Bob" || ins[1].SenderName != "Bob" {
		t.Errorf("sender names %q, %q, want Bob", ins[0].SenderName, ins[1].SenderName)
	}
	if n := len(h.srv.CallsTo("/open-apis/contact/v3/users/")); n != 1 {
		t.Errorf("contact looked up %d times, want 1 (cached)", n)
	}
	if in := ins[1]; in.ThreadKey != groupThread || in.StartThread || len(in.Mentions) != 0 || in.Text != "also on prod" ||
		in.Conversation != core.ConversationRef(feishutest.GroupChat+":"+atBotMessage) {
		t.Errorf("plain reply inbound %+v", in)
	}
}

func TestWebhookRejectsForgeries(t *testing.T) {
	// The fixture's signature vectors are timestamped 1767225601: run at that time.
	h := newHarness(t, func(o *feishu.Options) { o.Clock = fixedClock(time.Unix(1767225601, 0)) })
	h.run()
	payload := compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json"))

	at := h.clock.Now()
	forged, _ := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/events", payload, feishutest.EncryptKey, at)
	forged.Header.Set("X-Lark-Signature", strings.Repeat("0", 64))
	if s, _ := h.do(forged); s != http.StatusUnauthorized {
		t.Errorf("forged signature: status %d, want 401", s)
	}

	unsigned, _ := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/events", payload, feishutest.EncryptKey, at)
	unsigned.Header.Del("X-Lark-Signature")
	if s, _ := h.do(unsigned); s != http.StatusUnauthorized {
		t.Errorf("unsigned encrypted event: status %d, want 401", s)
	}

	otherKey, _ := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/events", payload, "some other encrypt key", at)
	if s, _ := h.do(otherKey); s != http.StatusUnauthorized {
		t.Errorf("signed with another key: status %d, want 401", s)
	}

	// Correctly signed, but the ciphertext is garbage: authentic, so acknowledged
	// (a redelivery could not fix it) and nothing is ingested.
	garbage := []byte(`{"encrypt":"AAECAwQFBgcICQoLDA0ODwABAgMEBQYHCAkKCwwNDg8="}`)
	req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/events", strings.NewReader(string(garbage)))
	req.Header.Set("X-Lark-Request-Timestamp", "1767225601")
	req.Header.Set("X-Lark-Request-Nonce", "n")
	req.Header.Set("X-Lark-Signature", feishu.Signature("1767225601", "n", feishutest.EncryptKey, garbage))
	if s, _ := h.do(req); s != http.StatusOK {
		t.Errorf("undecryptable signed body: status %d, want 200", s)
	}

	// Correctly encrypted and signed, but the wrong verification token.
	bad := feishutest.MessageEvent{MessageID: "om_wrongtoken", Text: "@_user_1 hi", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}, Token: "not the token"}
	if s, _ := h.post("events", bad.JSON(), feishutest.EncryptKey); s != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", s)
	}
	if n := len(h.eng.ins.All()); n != 0 {
		t.Errorf("%d inbounds ingested from rejected requests", n)
	}
	// The fixture's own signature vector is accepted.
	var v struct {
		Vectors []struct {
			Timestamp string `json:"X-Lark-Request-Timestamp"`
			Nonce     string `json:"X-Lark-Request-Nonce"`
			RawBody   string `json:"raw_body"`
			Sig       string `json:"expected_X-Lark-Signature"`
		}
	}
	if err := json.Unmarshal(fixture(t, "signature_vectors.json"), &v); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/events", strings.NewReader(v.Vectors[0].RawBody))
	req.Header.Set("X-Lark-Request-Timestamp", v.Vectors[0].Timestamp)
	req.Header.Set("X-Lark-Request-Nonce", v.Vectors[0].Nonce)
	req.Header.Set("X-Lark-Signature", v.Vectors[0].Sig)
	if s, b := h.do(req); s != http.StatusOK {
		t.Errorf("fixture signed body: %d %s", s, b)
	}
	if n := len(h.eng.ins.All()); n != 1 {
		t.Errorf("got %d inbounds after the valid request, want 1", n)
	}
}

func TestWebhookPlainTokenCheck(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.EncryptKey = "" })
	h.run()
	bad := feishutest.MessageEvent{MessageID: "om_x", Text: "@_user_1 hi", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}, Token: "forged"}
	if s, _ := h.post("events", bad.JSON(), ""); s != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", s)
	}
	if s, _ := h.post("events", []byte(`{"encrypt":"AAAA"}`), ""); s != http.StatusUnauthorized {
		t.Errorf("encrypted body without a key: status %d, want 401", s)
	}
	good := bad
	good.Token = ""
	if s, b := h.post("events", good.JSON(), ""); s != http.StatusOK {
		t.Errorf("good event: %d %s", s, b)
	}
	if n := len(h.eng.ins.All()); n != 1 {
		t.Errorf("got %d inbounds, want 1", n)
	}
}

func TestURLVerification(t *testing.T) {
	want := `{"challenge":"TESTchallenge-ajls384kdjx98XX"}`
	t.Run("plain", func(t *testing.T) {
		h := newHarness(t, func(o *feishu.Options) { o.EncryptKey = "" })
		s, b := h.post("events", fixture(t, "url_verification_plain.json"), "")
		if s != 200 || strings.TrimSpace(b) != want {
			t.Errorf("got %d %s", s, b)
		}
		forged := strings.Replace(string(fixture(t, "url_verification_plain.json")), "TESTverificationToken00000000001", "forged", 1)
		if s, _ := h.post("events", []byte(forged), ""); s != http.StatusUnauthorized {
			t.Errorf("forged token: %d, want 401", s)
		}
	})
	t.Run("encrypted", func(t *testing.T) {
		h := newHarness(t, nil)
		// The platform does not sign challenges: post the fixture body as is.
		req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/events", strings.NewReader(string(fixture(t, "url_verification_encrypted.json"))))
		s, b := h.do(req)
		if s != 200 || strings.TrimSpace(b) != want {
			t.Errorf("got %d %s", s, b)
		}
	})
	t.Run("card", func(t *testing.T) {
		h := newHarness(t, nil)
		s, b := h.post("card", []byte(`{"challenge":"c1","token":"TESTverificationToken00000000001","type":"url_verification"}`), "")
		if s != 200 || strings.TrimSpace(b) != `{"challenge":"c1"}` {
			t.Errorf("got %d %s", s, b)
		}
	})
}

func TestRedeliverySameDedupKey(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	first := compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json"))
	again := strings.Replace(string(fixture(t, "event_v2_im_message_receive_group_at_bot.redelivery.json")), "d0c77bc2374fe226a28da071812638e5", "0000000000000000000000000000beef", 1)
	for i, p := range [][]byte{first, compact(t, []byte(again))} {
		if s, b := h.post("events", p, feishutest.EncryptKey); s != 200 {
			t.Fatalf("delivery %d: %d %s", i, s, b)
		}
	}
	ins := h.eng.ins.All()
	if len(ins) != 2 || ins[0].DedupKey != ins[1].DedupKey || ins[0].DedupKey != "feishu:"+atBotMessage {
		t.Errorf("inbounds %+v", ins)
	}
}

func TestMentionPlaceholders(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	var mentions []feishutest.Mention
	text := ""
	for i := 1; i <= 10; i++ {
		key := "@_user_" + string(rune('0'+i%10))
		if i == 10 {
			key = "@_user_10"
		}
		name := "Person" + key[len("@_user_"):]
		mentions = append(mentions, feishutest.Mention{Key: key, OpenID: "ou_person" + key[7:], UserID: "u" + key[7:], Name: name})
		text += key + " "
	}
	mentions[0] = feishutest.BotMention("@_user_1")
	ev := feishutest.MessageEvent{MessageID: "om_many", Text: text + "go", Mentions: mentions}
	if s, b := h.post("events", ev.JSON(), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	ins := h.eng.ins.All()
	if len(ins) != 1 {
		t.Fatalf("got %d inbounds", len(ins))
	}
	want := "@engineer @Person2 @Person3 @Person4 @Person5 @Person6 @Person7 @Person8 @Person9 @Person10 go"
	if ins[0].Text != want {
		t.Errorf("text %q\nwant %q", ins[0].Text, want)
	}
	stranger := feishutest.MessageEvent{MessageID: "om_stranger", Sender: "ou_stranger", Text: "@_user_1 hi", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}
	if s, b := h.post("events", stranger.JSON(), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	if got := h.eng.ins.All()[1].SenderName; got != "ou_stranger" {
		t.Errorf("unknown user's name %q, want the open_id", got)
	}
}

func TestStarAccount(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Bot = "*" })
	h.run()
	if s, b := h.post("events", compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	in := h.eng.ins.All()[0]
	if in.Text != "please summarise today's deploy failures" || !slices.Equal(in.Mentions, []string{"*"}) || in.DefaultBot != "" {
		t.Errorf("inbound %+v", in)
	}
	if _, err := h.a.Deliver(ctxT(t), core.Delivery{Conversation: in.Conversation, ReplyTo: in.PlatformID,
		Sender: core.Sender{Actor: "bot:reviewer", Handle: "reviewer", Name: "Reviewer"}, Text: "LGTM"}); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Messages()[0].Text(); got != "**Reviewer**\nLGTM" {
		t.Errorf("text %q", got)
	}
}

func TestDirectMessages(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	ctx := ctxT(t)
	// Alice is allowed.
	if s, b := h.post("events", compact(t, fixture(t, "event_v2_im_message_receive_p2p.json")), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	in := h.eng.ins.All()[0]
	if in.ThreadKey != "feishu:"+feishutest.P2PChat || in.Conversation != core.ConversationRef(feishutest.P2PChat) || !in.StartThread ||
		in.Text != "hi bot, what's the on-call rota this week?" || in.NewThread {
		t.Errorf("p2p inbound %+v", in)
	}
	// Bob is not: one short reply with his open_id, nothing ingested.
	bob := feishutest.MessageEvent{MessageID: "om_bobdm", ChatID: "oc_bobdm", ChatType: "p2p", Sender: feishutest.BobOpenID, Text: "hello"}
	if s, b := h.post("events", bob.JSON(), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	msgs, err := h.srv.WaitMessages(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := msgs[0]; m.ReplyTo != "om_bobdm" || m.InThread || !strings.Contains(m.Text(), feishutest.BobOpenID) {
		t.Errorf("refusal %+v %q", m, m.Text())
	}
	// Unsupported types get a short reply and no run.
	img := feishutest.MessageEvent{MessageID: "om_img", ChatID: feishutest.P2PChat, ChatType: "p2p", MsgType: "sticker", Content: `{"file_key":"v2_x"}`}
	if s, b := h.post("events", img.JSON(), feishutest.EncryptKey); s != 200 {
		t.Fatalf("%d %s", s, b)
	}
	msgs, err = h.srv.WaitMessages(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if m := msgs[1]; m.ReplyTo != "om_img" || !strings.Contains(m.Text(), "sticker messages are not supported") {
		t.Errorf("unsupported notice %+v %q", m, m.Text())
	}
	// "/new" then a message: the message starts a new thread.
	for i, txt := range []string{"/new", "fresh start"} {
		ev := feishutest.MessageEvent{MessageID: "om_new" + string(rune('a'+i)), ChatID: feishutest.P2PChat, ChatType: "p2p", Text: txt}
		if s, b := h.post("events", ev.JSON(), feishutest.EncryptKey); s != 200 {
			t.Fatalf("%d %s", s, b)
		}
	}
	ins := h.eng.ins.All()
	if len(ins) != 2 || !ins[1].NewThread || ins[1].Text != "fresh start" {
		t.Errorf("after /new: %+v", ins)
	}
	// The /new acknowledgement is a queued notice: wait for it so the
	// delivery below is the last message.
	msgs, err = h.srv.WaitMessages(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m := msgs[2]; m.ReplyTo != "om_newa" || !strings.Contains(m.Text(), "starts a new conversation") {
		t.Errorf("/new acknowledgement %+v %q", m, m.Text())
	}
	// Deliver into the p2p chat creates a message there when there is no reply target.
	if _, err := h.a.Deliver(ctx, core.Delivery{Conversation: in.Conversation, Text: "Rota: Bob"}); err != nil {
		t.Fatal(err)
	}
	msgs = h.srv.Messages()
	if m := msgs[len(msgs)-1]; m.Kind != "create" || m.IDType != "chat_id" || m.ReceiveID != feishutest.P2PChat {
		t.Errorf("p2p delivery %+v", m)
	}
}

func TestTokenRefreshedOnInvalidToken(t *testing.T) {
	h := newHarness(t, nil)
	ctx := ctxT(t)
	d := core.Delivery{Conversation: core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage), Text: "one"}
	if _, err := h.a.Deliver(ctx, d); err != nil {
		t.Fatal(err)
	}
	h.srv.InvalidateTokens()
	d.Text = "two"
	if _, err := h.a.Deliver(ctx, d); err != nil {
		t.Fatalf("Deliver after token expiry: %v", err)
	}
	if n := len(h.srv.CallsTo("/open-apis/auth/v3/tenant_access_token/internal")); n != 2 {
		t.Errorf("token fetched %d times, want 2", n)
	}
	if n := len(h.srv.CallsTo("/open-apis/im/v1/messages")); n != 3 {
		t.Errorf("%d message calls, want 3 (one refused)", n)
	}
	if n := len(h.srv.Messages()); n != 2 {
		t.Errorf("%d messages sent, want 2", n)
	}
	// A token refused twice in a row is an error, not a loop.
	h.srv.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/messages", Code: feishu.CodeInvalidToken, Msg: "invalid"})
	h.srv.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/messages", Code: feishu.CodeInvalidToken, Msg: "invalid"})
	if _, err := h.a.Deliver(ctx, d); err == nil {
		t.Error("Deliver succeeded although the token was refused twice")
	}
}

func TestDeliverErrors(t *testing.T) {
	h := newHarness(t, nil)
	ctx := ctxT(t)
	d := core.Delivery{Outbox: 1, Conversation: core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage), Text: "hi <b>"}

	h.srv.RateLimitNext("/open-apis/im/v1/messages", 0)
	if _, err := h.a.Deliver(ctx, d); err != nil {
		t.Fatalf("rate limited once: %v", err)
	}

	h.srv.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/messages", Code: feishu.CodeBotNotInChat, Msg: "Bot/User can NOT be out of the chat."})
	_, err := h.a.Deliver(ctx, d)
	var de core.DeliveryError
	if !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("bot not in chat: %v, want a permanent DeliveryError", err)
	}

	h.srv.RateLimitNext("/open-apis/im/v1/messages", 30)
	_, err = h.a.Deliver(ctx, d)
	if !errors.As(err, &de) || de.Permanent() || de.RetryAfter() != 30*time.Second {
		t.Errorf("long rate limit: %v, want temporary with RetryAfter 30s", err)
	}

	h.srv.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/messages", Code: feishu.CodeInvalidRequest, Msg: "card invalid"})
	before := len(h.srv.Messages())
	if _, err := h.a.Deliver(ctx, core.Delivery{Outbox: 2, Conversation: d.Conversation, Text: "hi <b>"}); err != nil {
		t.Fatalf("card rejected: %v", err)
	}
	msgs := h.srv.Messages()
	if len(msgs) != before+1 || msgs[len(msgs)-1].MsgType != "text" || msgs[len(msgs)-1].Text() != "hi <b>" {
		t.Errorf("fallback %+v", msgs[len(msgs)-1])
	}

	if _, err := h.a.Deliver(ctx, core.Delivery{Conversation: "a:b:c", Text: "x"}); !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("bad conversation: %v", err)
	}

	// A long reply is split; a retry of the same outbox entry posts nothing new.
	long := strings.Repeat("paragraph of words. ", 150) + "\n\n" + strings.Repeat("more words here. ", 300)
	before = len(h.srv.Messages())
	long1 := core.Delivery{Outbox: 9, Conversation: d.Conversation, Text: long}
	if _, err := h.a.Deliver(ctx, long1); err != nil {
		t.Fatal(err)
	}
	after := len(h.srv.Messages())
	if after-before < 2 {
		t.Errorf("long reply sent as %d messages", after-before)
	}
	if _, err := h.a.Deliver(ctx, long1); err != nil || len(h.srv.Messages()) != after {
		t.Errorf("retry posted again: %v, %d messages", err, len(h.srv.Messages())-after)
	}
}

func TestLongConnection(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	calls := h.srv.CallsTo("/callback/ws/endpoint")
	if len(calls) == 0 || !strings.Contains(string(calls[0].Body), `"AppID":"cli_a0b1c2d3e4f5a6b7"`) || calls[0].Auth != "" {
		t.Errorf("endpoint discovery %+v", calls)
	}
	if err := h.srv.WaitPings(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// A fragmented event is reassembled, handled and acked once.
	if _, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_group_thread_reply.json")), 3); err != nil {
		t.Fatal(err)
	}
	acks, err := h.srv.WaitAcks(ctx, 1)
	// The pong to the first ping carried the server's config (PingInterval 60 s):
	// the next ping waits for that period, it does not answer the pong.
	if n := h.srv.Pings(); n != 1 {
		t.Errorf("%d pings before the event's ack, want 1 (one a minute)", n)
	}
	if err != nil {
		t.Fatal(err)
	}
	if a := acks[0]; a.Code != 200 || a.Frame.Header("seq") != "2" || a.Frame.Header("biz_rt") == "" || a.Payload != `{"code":200,"headers":null,"data":null}` || a.Frame.Service != feishutest.ServiceID {
		t.Errorf("ack %+v", a)
	}
	ins := h.eng.ins.Wait(t, 1)
	if ins[0].ThreadKey != groupThread || ins[0].Text != "@engineer does this also hit staging? cc @Alice" {
		t.Errorf("inbound %+v", ins[0])
	}

	// The server drops the connection: the adapter reconnects with a fresh endpoint.
	h.srv.DropConnections()
	if err := h.srv.WaitConnections(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := len(h.srv.CallsTo("/callback/ws/endpoint")); n < 2 {
		t.Errorf("endpoint called %d times, want a fresh discovery per connection", n)
	}
	if _, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.WaitAcks(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if ins := h.eng.ins.Wait(t, 2); ins[1].DedupKey != "feishu:"+atBotMessage || !ins[1].StartThread {
		t.Errorf("after reconnect %+v", ins[1])
	}

	// A failed ingest is acked with 500 so the platform redelivers.
	h.eng.mu.Lock()
	h.eng.fail = errors.New("disk full")
	h.eng.mu.Unlock()
	if _, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_p2p.json")), 1); err != nil {
		t.Fatal(err)
	}
	acks, err = h.srv.WaitAcks(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if acks[2].Code != 500 {
		t.Errorf("ack after failed ingest: %+v", acks[2])
	}

	// Cancel stops Run cleanly and closes the connection.
	h.stop()
	if err := h.srv.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLongConnectionClientError(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket })
	h.srv.FailEndpointNext(feishu.CodeEndpointTooMany, "exceed connection limit")
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctxT(t)) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after a client error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept going after a client error")
	}
}

func TestLongConnectionRetriesBusyEndpoint(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket })
	h.srv.FailEndpointNext(feishu.CodeSystemBusy, "system busy")
	h.run()
	if err := h.srv.WaitConnections(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
}

func TestNewValidates(t *testing.T) {
	base := feishu.Options{Name: "a", Bot: "x", AppID: "i", AppSecret: "s", Engine: newFakeEngine()}
	for name, edit := range map[string]func(*feishu.Options){
		"no name":         func(o *feishu.Options) { o.Name = "" },
		"no engine":       func(o *feishu.Options) { o.Engine = nil },
		"bad mode":        func(o *feishu.Options) { o.Mode = "poll" },
		"bad dm policy":   func(o *feishu.Options) { o.DMPolicy = "x" },
		"webhook no auth": func(o *feishu.Options) { o.Mode = feishu.ModeWebhook },
	} {
		o := base
		edit(&o)
		if _, err := feishu.New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	a, err := feishu.New(base)
	if err != nil || a.Account() != "feishu/a" || a.Bot() != "x" {
		t.Errorf("New = %v, %v", a, err)
	}
}

// TestLongConnectionPingsAtServerInterval: the first ping goes out on connect, the
// next after the PingInterval the server gave (1 s here).
func TestLongConnectionPingsAtServerInterval(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket })
	h.srv.SetClientConfig(feishu.ClientConfig{ReconnectCount: -1, PingInterval: 1})
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitPings(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Connections(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestCardCallbacks(t *testing.T) {
	// The legacy signature vector is timestamped 1767225700: run at that time.
	h := newHarness(t, func(o *feishu.Options) { o.Clock = fixedClock(time.Unix(1767225700, 0)) })
	h.run()
	if s, b := h.post("card", compact(t, fixture(t, "card_action_trigger_v2.json")), feishutest.EncryptKey); s != 200 || strings.TrimSpace(b) != "{}" {
		t.Errorf("card.action.trigger: %d %s", s, b)
	}
	var v struct {
		Timestamp string `json:"X-Lark-Request-Timestamp"`
		Nonce     string `json:"X-Lark-Request-Nonce"`
		RawBody   string `json:"raw_body"`
		Sig       string `json:"expected_X-Lark-Signature"`
	}
	if err := json.Unmarshal(fixture(t, "card_action_legacy_signature_vector.json"), &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig  string
		want int
	}{{v.Sig, 200}, {strings.Repeat("1", 40), 401}, {"", 401}} {
		req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/card", strings.NewReader(v.RawBody))
		req.Header.Set("X-Lark-Request-Timestamp", v.Timestamp)
		req.Header.Set("X-Lark-Request-Nonce", v.Nonce)
		if tc.sig != "" {
			req.Header.Set("X-Lark-Signature", tc.sig)
		}
		if s, b := h.do(req); s != tc.want {
			t.Errorf("legacy card with signature %q: %d %s, want %d", tc.sig, s, b, tc.want)
		}
	}
	if n := len(h.eng.ins.All()); n != 0 {
		t.Errorf("card callbacks ingested %d messages", n)
	}
	if a := h.eng.answers.All(); len(a) != 0 {
		t.Errorf("buttons of other cards answered questions: %+v", a)
	}
}

func TestUpdateCard(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.a.UpdateCard(ctxT(t), "om_74db9dfb56bf839128d21cabe82e7266", "✅ Approved by **Alice**"); err != nil {
		t.Fatal(err)
	}
	calls := h.srv.CallsTo("/open-apis/im/v1/messages/om_74db9dfb56bf839128d21cabe82e7266")
	if len(calls) != 1 || calls[0].Method != http.MethodPatch || !strings.Contains(string(calls[0].Body), `Approved by **Alice**`) {
		t.Errorf("patch calls %+v", calls)
	}
}
