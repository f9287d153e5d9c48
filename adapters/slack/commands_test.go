package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// dmEvent is an Events API callback for a top-level DM message from U0TEST001.
func dmEvent(t *testing.T, ts, text string) []byte {
	t.Helper()
	return mustJSON(t, map[string]any{
		"token": "TESTverificationTOKEN000", "team_id": "T0TEST", "type": "event_callback", "event_id": "Ev" + ts,
		"event": map[string]any{"type": "message", "channel": "D0TEST001", "channel_type": "im", "user": "U0TEST001", "ts": ts, "text": text},
	})
}

func (e *env) command(t *testing.T, c slacktest.Command) *httptest.ResponseRecorder {
	t.Helper()
	req, err := slacktest.CommandRequest(context.Background(), "/slack/acme/commands", testSecret, c, e.a.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	e.mux.ServeHTTP(rec, req)
	return rec
}

func replyText(t *testing.T, b []byte) string {
	t.Helper()
	var r commandReply
	unmarshal(t, b, &r)
	if r.ResponseType != "ephemeral" {
		t.Errorf("response_type %q, want ephemeral", r.ResponseType)
	}
	return r.Text
}

// TestSlashNewOverHTTP: the /new slash command in a DM (a signed form POST) is
// confirmed privately without any model call, and the next DM message begins a new
// thread; the one after it continues normally.
func TestSlashNewOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", UserName: "alice", Command: "/new"})
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	if got := replyText(t, rec.Body.Bytes()); got != replyNewPending {
		t.Errorf("reply %q", got)
	}
	if n := len(e.engine.ins.All()); n != 0 {
		t.Fatalf("a bare /new was ingested (%d)", n)
	}
	e.postEvent2(t, dmEvent(t, "1767225600.000100", "fix the build"))
	e.postEvent2(t, dmEvent(t, "1767225601.000100", "and the lint"))
	got := e.engine.ins.All()
	if len(got) != 2 || !got[0].NewThread || got[1].NewThread {
		t.Fatalf("inbounds %+v, want the first after /new to start a new thread, the second not", got)
	}

	// "/new TEXT" begins the new thread with TEXT at once.
	rec = e.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/new", Text: "plan the release", TriggerID: "trig-2"})
	if got := replyText(t, rec.Body.Bytes()); got != replyNewStarted {
		t.Errorf("reply %q", got)
	}
	got = e.engine.ins.All()
	if len(got) != 3 || !got[2].NewThread || got[2].Text != "plan the release" || got[2].ThreadKey != "slack:T0TEST:D0TEST001" ||
		got[2].DedupKey != "slack:T0TEST:D0TEST001:command:trig-2" {
		t.Fatalf("/new TEXT inbound %+v", got[len(got)-1])
	}

	// In a channel /new explains itself and changes nothing.
	rec = e.command(t, slacktest.Command{Channel: "C0TEST001", User: "U0TEST001", Command: "/new"})
	if got := replyText(t, rec.Body.Bytes()); got != replyNewChannel {
		t.Errorf("channel reply %q", got)
	}
	if n := len(e.slack.CallsTo("chat.postMessage")); n != 0 {
		t.Errorf("chat.postMessage called %d times for slash commands; the reply is the response", n)
	}
}

// postEvent2 posts a signed Events API body and wants 200.
func (e *env) postEvent2(t *testing.T, body []byte) {
	t.Helper()
	if rec := e.post(t, "/slack/acme/events", body, nil); rec.Code != http.StatusOK {
		t.Fatalf("event status %d %s", rec.Code, rec.Body)
	}
}

// TestPlainTextNewInDM: a DM that is just "new" (or "/new", as Slack delivers it
// when no slash command is installed) is the same command: not stored, confirmed
// in the DM, and the next message begins a new thread.
func TestPlainTextNewInDM(t *testing.T) {
	for _, word := range []string{"new", "/new", " NEW "} {
		t.Run(word, func(t *testing.T) {
			e := newEnv(t, nil)
			e.postEvent2(t, dmEvent(t, "1767225600.000100", word))
			if n := len(e.engine.ins.All()); n != 0 {
				t.Fatalf("the command was ingested as a message")
			}
			calls, err := e.slack.WaitCalls(waitCtx(t), "chat.postMessage", 1)
			if err != nil || calls[0].Form.Get("channel") != "D0TEST001" || calls[0].Form.Get("text") != replyNewPending {
				t.Fatalf("confirmation %+v, %v", calls, err)
			}
			e.postEvent2(t, dmEvent(t, "1767225601.000100", "hello"))
			if got := e.engine.ins.All(); len(got) != 1 || !got[0].NewThread {
				t.Fatalf("inbounds %+v, want one that starts a new thread", got)
			}
		})
	}
	t.Run("a sentence with new in it is a message", func(t *testing.T) {
		e := newEnv(t, nil)
		e.postEvent2(t, dmEvent(t, "1767225600.000100", "new idea: cache the build"))
		if got := e.engine.ins.All(); len(got) != 1 || got[0].NewThread {
			t.Fatalf("inbounds %+v", got)
		}
	})
}

// TestSlashNewOverSocketMode: a slash_commands envelope is acked with the private
// reply as its payload, after the pending /new is stored; when storing fails the
// envelope is not acked.
func TestSlashNewOverSocketMode(t *testing.T) {
	st := &failState{failed: make(chan struct{}, 10)}
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.State = st })
	runAdapter(t, e.a)
	ctx := waitCtx(t)
	cmd := slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", UserName: "alice", Command: "/new"}

	st.fail = true
	if err := e.slack.PushCommand(ctx, "cmd-1", cmd); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.failed:
	case <-ctx.Done():
		t.Fatal("cmd-1 was never handled")
	}
	// Envelopes are handled in order: once the next one is acked, cmd-1's ack
	// would have been sent before it.
	st.failNext(false)
	if err := e.slack.PushCommand(ctx, "cmd-2", cmd); err != nil {
		t.Fatal(err)
	}
	ack, err := e.slack.WaitAck(ctx, "cmd-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range e.slack.Acks() {
		if a.EnvelopeID == "cmd-1" {
			t.Error("a /new whose storing failed was acked")
		}
	}
	if got := replyText(t, ack.Payload); got != replyNewPending {
		t.Errorf("ack reply %q", got)
	}
	if err := e.slack.PushEnvelope(ctx, "events_api", "ev-1", json.RawMessage(dmEvent(t, "1767225600.000100", "hello")), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "ev-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.engine.ins.All(); len(got) != 1 || !got[0].NewThread {
		t.Fatalf("inbounds %+v, want one that starts a new thread", got)
	}
}

// failState is a memState whose SetCursor can be made to fail.
type failState struct {
	memState
	fail   bool
	failed chan struct{} // gets a value for every refused SetCursor
}

func (s *failState) failNext(on bool) {
	s.memState.mu.Lock()
	s.fail = on
	s.memState.mu.Unlock()
}

func (s *failState) SetCursor(ctx context.Context, name, value string) error {
	s.memState.mu.Lock()
	fail := s.fail
	s.memState.mu.Unlock()
	if fail {
		s.failed <- struct{}{}
		return errors.New("store closed")
	}
	return s.memState.SetCursor(ctx, name, value)
}

var _ State = (*failState)(nil)

// parentState is a memState whose BotParent knows one bot message.
type parentState struct {
	memState
	parent string
	who    core.ActorID
}

func (s *parentState) BotParent(_ context.Context, _, parentKey string) (core.ActorID, bool, error) {
	return s.who, parentKey == s.parent, nil
}

// TestReplyToBotMessageInbound: a DM reply in the Slack thread of a message a bot
// delivered carries ReplyToKey (the bot message's identity, as MessageKey records
// it), is bound to the DM's top level and is for that bot unless it names someone.
func TestReplyToBotMessageInbound(t *testing.T) {
	st := &parentState{who: core.BotActorID("engineer")}
	e := newEnv(t, func(o *Options) { o.State = st; o.Bot = "*" })
	st.parent = e.a.MessageKey(core.ConversationRef("T0TEST:D0TEST001"), "1767300000.000002")
	if st.parent != "slack:T0TEST:D0TEST001:1767300000.000002" {
		t.Fatalf("MessageKey = %q", st.parent)
	}
	reply := func(ts, text string) []byte {
		return mustJSON(t, map[string]any{"token": "x", "team_id": "T0TEST", "type": "event_callback", "event_id": "Ev" + ts,
			"event": map[string]any{"type": "message", "channel": "D0TEST001", "channel_type": "im", "user": "U0TEST001", "ts": ts,
				"thread_ts": "1767300000.000002", "text": text}})
	}
	e.postEvent2(t, reply("1767300001.000100", "and the lint?"))
	e.postEvent2(t, reply("1767300002.000100", "@chief_of_staff what do you think?"))
	got := e.engine.ins.All()
	if len(got) != 2 {
		t.Fatalf("inbounds %d", len(got))
	}
	in := got[0]
	if in.ReplyToKey != st.parent || in.Conversation != "T0TEST:D0TEST001" || len(in.Mentions) != 1 || in.Mentions[0] != "engineer" {
		t.Errorf("reply inbound %+v", in)
	}
	if in := got[1]; in.ReplyToKey != st.parent || len(in.Mentions) != 0 {
		t.Errorf("a reply naming another bot is for that bot: %+v", in)
	}
	st.parent = "" // unknown parent: the Slack thread is its own thread, as before
	e.postEvent2(t, reply("1767300003.000100", "hi"))
	if in := e.engine.ins.All()[2]; in.ReplyToKey != "" || in.Conversation != "T0TEST:D0TEST001:1767300000.000002" {
		t.Errorf("reply under an unknown message %+v", in)
	}
}
