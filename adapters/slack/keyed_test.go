package slack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"openbot/core"
)

// blockingEngine holds every Ingest of a message in channel block until release
// is closed.
type blockingEngine struct {
	*fakeEngine
	block   string
	release chan struct{}
}

func (b *blockingEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	if strings.Contains(in.DedupKey, ":"+b.block+":") {
		select {
		case <-b.release:
		case <-ctx.Done():
			return core.IngestResult{}, ctx.Err()
		}
	}
	return b.fakeEngine.Ingest(ctx, in)
}

// mentionEnvelope is the fixture app_mention envelope with its id, channel and ts replaced.
func mentionEnvelope(t *testing.T, id, channel, ts string) []byte {
	t.Helper()
	var env map[string]any
	unmarshal(t, fixture(t, "socket_mode_events_api_app_mention.json"), &env)
	env["envelope_id"] = id
	ev := env["payload"].(map[string]any)["event"].(map[string]any)
	ev["channel"], ev["ts"], ev["event_ts"] = channel, ts, ts
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSocketModeChannelsStoredConcurrently: while the ingest of a message in one
// channel is held, a message in another channel is stored and acked; the held
// channel's second message waits for its first, is stored after it, and neither
// is acked before it is stored.
func TestSocketModeChannelsStoredConcurrently(t *testing.T) {
	eng := &blockingEngine{fakeEngine: newFakeEngine(), block: "C0SLOW", release: make(chan struct{})}
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.SigningSecret = ""; o.Engine = eng })
	eng.fakeEngine = e.engine
	runAdapter(t, e.a)
	ctx := waitCtx(t)

	for _, env := range [][]byte{
		mentionEnvelope(t, "slow-1", "C0SLOW", "1767225600.000001"),
		mentionEnvelope(t, "slow-2", "C0SLOW", "1767225600.000002"),
		mentionEnvelope(t, "fast-1", "C0FAST", "1767225600.000003"),
	} {
		if err := e.slack.Push(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.slack.WaitAck(ctx, "fast-1"); err != nil {
		t.Fatalf("the other channel's envelope waited for the held one: %v", err)
	}
	for _, a := range e.slack.Acks() {
		if strings.HasPrefix(a.EnvelopeID, "slow-") {
			t.Fatalf("%s acked before it was stored", a.EnvelopeID)
		}
	}
	close(eng.release)
	for _, id := range []string{"slow-1", "slow-2"} {
		if _, err := e.slack.WaitAck(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var slow []string
	for _, in := range e.engine.ins.All() {
		if strings.Contains(in.DedupKey, ":C0SLOW:") {
			slow = append(slow, in.PlatformID)
		}
	}
	if len(slow) != 2 || slow[0] != "1767225600.000001" || slow[1] != "1767225600.000002" {
		t.Errorf("held channel stored %v, want its two messages in order", slow)
	}
}
