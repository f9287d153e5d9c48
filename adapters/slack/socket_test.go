package slack

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"

	"openbot/adapters/slack/slacktest"
)

// runAdapter runs a.Run in a goroutine and returns a stop function that cancels it
// and waits (bounded) for Run to return its error.
func runAdapter(t *testing.T, a *Adapter) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return within 15s of cancel")
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSocketModeAcksAfterIngest: hello, then an events_api envelope -> the event is
// ingested and only then acked (DESIGN.md §4: ack after the durable ingest); the
// retry envelope is acked and carries the same dedup key; interactive envelopes are
// acked; a disconnect makes the client reconnect.
func TestSocketModeAcksAfterIngest(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.SigningSecret = "" })
	stop := runAdapter(t, e.a)
	ctx := waitCtx(t)

	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention.json")); err != nil {
		t.Fatal(err)
	}
	ack, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000001")
	if err != nil {
		t.Fatalf("no ack: %v", err)
	}
	if len(ack.Payload) != 0 {
		t.Errorf("ack payload %s, want none", ack.Payload)
	}
	got := e.engine.ins.All()
	if len(got) != 1 {
		t.Fatalf("acked before the event was ingested: %d inbounds at ack time", len(got))
	}
	in := got[0]
	if in.DedupKey != "slack:T0TEST:C0TEST001:1767225600.000100" || !in.StartThread || in.Text != "@engineer can you review the failing build on main?" {
		t.Errorf("socket inbound %+v", in)
	}

	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention_retry.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000002"); err != nil {
		t.Fatal(err)
	}
	if got := e.engine.ins.Wait(t, 2); got[1].DedupKey != in.DedupKey {
		t.Errorf("retry dedup key %q, want %q", got[1].DedupKey, in.DedupKey)
	}

	if err := e.slack.Push(ctx, fixture(t, "socket_mode_interactive_block_actions.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000003"); err != nil {
		t.Fatal(err)
	}
	// A click on a question button is acked after Engine.Answer stored it.
	click := slacktest.Click{User: "U0TEST001", UserName: "alice", Channel: "C0TEST001", MessageTS: "1767225601.000100",
		ActionID: "openbot_q_0", Value: "tok123:0"}
	if err := e.slack.PushClick(ctx, "click-1", click); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "click-1"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.engine.answers.All()); n != 1 {
		t.Fatalf("click acked with %d answers stored, want 1", n)
	}

	// Slack asks for a refresh: the client opens a new connection and keeps working.
	if err := e.slack.Push(ctx, fixture(t, "socket_mode_disconnect.json")); err != nil {
		t.Fatal(err)
	}
	if err := e.slack.Wait(ctx, func(s *slacktest.Server) bool { open, total := s.Connections(); return total >= 2 && open >= 1 }); err != nil {
		t.Fatalf("no reconnect after disconnect: %v", err)
	}
	var env map[string]any
	unmarshal(t, fixture(t, "socket_mode_events_api_app_mention.json"), &env)
	env["envelope_id"] = "after-reconnect"
	payload := strings.Replace(string(mustJSON(t, env)), "1767225600.000100", "1767225700.000100", -1)
	if err := e.slack.Push(ctx, json.RawMessage(payload)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "after-reconnect"); err != nil {
		t.Fatal(err)
	}
	if got := e.engine.ins.Wait(t, 3); got[2].ThreadKey != "slack:T0TEST:C0TEST001:1767225700.000100" {
		t.Errorf("after reconnect thread key %q", got[2].ThreadKey)
	}

	if n := len(e.slack.CallsTo("auth.test")); n != 1 {
		t.Errorf("auth.test called %d times, want 1", n)
	}
	if err := stop(); err != nil {
		t.Errorf("Run returned %v after cancel, want nil", err)
	}
}

func TestRunRefusedCredentials(t *testing.T) {
	t.Run("bot token", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.BotToken = "xoxb-wrong" })
		if err := e.a.Run(waitCtx(t)); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
			t.Errorf("Run = %v, want invalid_auth", err)
		}
	})
	t.Run("app token", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.AppToken = "xapp-wrong" })
		if err := e.a.Run(waitCtx(t)); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
			t.Errorf("Run = %v, want invalid_auth", err)
		}
	})
}

func TestRunHTTPModeWaitsForCancel(t *testing.T) {
	e := newEnv(t, nil)
	stop := runAdapter(t, e.a)
	if _, err := e.slack.WaitCalls(waitCtx(t), "auth.test", 1); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if open, total := e.slack.Connections(); open+total != 0 {
		t.Errorf("http mode opened a websocket")
	}
}

// TestSocketModeReconnectsAfterDrop: the websocket dies without a disconnect frame;
// the adapter reconnects and keeps ingesting.
func TestSocketModeReconnectsAfterDrop(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket })
	runAdapter(t, e.a)
	ctx := waitCtx(t)
	if err := e.slack.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	e.slack.DropConnections()
	if err := e.slack.Wait(ctx, func(s *slacktest.Server) bool { open, total := s.Connections(); return open == 1 && total >= 2 }); err != nil {
		t.Fatalf("no reconnect: %v", err)
	}
	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000001"); err != nil {
		t.Fatal(err)
	}
	e.engine.ins.Wait(t, 1)
}

// TestSocketModeFailedIngestIsNotAcked: an envelope whose Ingest fails (the store
// refused it) is left un-acked, so Slack redelivers it; the envelope after it is
// handled and acked in order; the redelivery is ingested exactly once and acked.
func TestSocketModeFailedIngestIsNotAcked(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket })
	const failing = "slack:T0TEST:C0TEST001:1767225600.000100"
	var mu sync.Mutex
	broken := true
	e.engine.errFn = func(in core.Inbound) error {
		mu.Lock()
		defer mu.Unlock()
		if broken && in.DedupKey == failing {
			return errors.New("store closed")
		}
		return nil
	}
	runAdapter(t, e.a)
	ctx := waitCtx(t)

	first := fixture(t, "socket_mode_events_api_app_mention.json")
	if err := e.slack.Push(ctx, first); err != nil {
		t.Fatal(err)
	}
	// A second, healthy envelope: envelopes are handled in order, so once its ack
	// is in, the first one has been handled too.
	second := strings.NewReplacer("5f0e3a2b-0000-4c1d-9e8f-000000000001", "second", "1767225600.000100", "1767225601.000100").Replace(string(first))
	if err := e.slack.Push(ctx, []byte(second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.slack.Acks() {
		if a.EnvelopeID == "5f0e3a2b-0000-4c1d-9e8f-000000000001" {
			t.Fatal("the envelope whose ingest failed was acked: Slack would not redeliver it")
		}
	}

	mu.Lock()
	broken = false
	mu.Unlock()
	// Slack redelivers the un-acked envelope (retry_attempt 1, a new envelope id).
	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention_retry.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000002"); err != nil {
		t.Fatal(err)
	}
	var n int
	for _, in := range e.engine.ins.All() {
		if in.DedupKey == failing {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the redelivered message was ingested %d times, want 1", n)
	}
}

// TestSocketModeMalformedEnvelopeAckedAndLogged: a frame slack-go cannot parse is
// acked (so Slack stops redelivering it) and logged at WARN.
func TestSocketModeMalformedEnvelopeAckedAndLogged(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, func(o *Options) {
		o.Mode = ModeSocket
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	runAdapter(t, e.a)
	ctx := waitCtx(t)
	bad := `{"envelope_id":"bad-1","type":"events_api","payload":{"type":"event_callback","event":{"type":"message","ts":42}},"accepts_response_payload":false}`
	if err := e.slack.Push(ctx, []byte(bad)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "bad-1"); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "malformed socket mode envelope") || !strings.Contains(out, "account=slack/acme") {
		t.Errorf("no WARN line with account and reason:\n%s", out)
	}
}
