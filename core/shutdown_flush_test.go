package core_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"openbot/core"
)

// holdAdapter holds its first delivery in hold, which sees the delivery's context.
type holdAdapter struct {
	*recAdapter
	once sync.Once
	hold func(ctx context.Context)
}

func (a *holdAdapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	a.once.Do(func() { a.hold(ctx) })
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return a.recAdapter.Deliver(ctx, d)
}

// lineWatch is a log writer that calls f once a line containing s is written.
type lineWatch struct {
	s    string
	once *sync.Once
	f    func()
}

func (w lineWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.s) {
		w.once.Do(w.f)
	}
	return len(p), nil
}

// TestShutdownWaitsForDeliveryInFlight: a reply in delivery when the engine stops
// is delivered, not abandoned: the engine waits (within its grace) for the lanes
// to drain before it cancels deliveries.
func TestShutdownWaitsForDeliveryInFlight(t *testing.T) {
	h := newHarness(t, core.Limits{})
	stopping := make(chan struct{})
	h.opts = func(o *core.Options) {
		o.Logger = slog.New(slog.NewTextHandler(lineWatch{s: "engine stopping", once: &sync.Once{}, f: func() { close(stopping) }}, nil))
	}
	delivering := make(chan struct{})
	var cancelled error
	ad := &holdAdapter{recAdapter: h.ad, hold: func(ctx context.Context) {
		close(delivering)
		select {
		case <-stopping:
		case <-ctx.Done():
		}
		cancelled = ctx.Err()
	}}
	h.start2(ad)
	h.say("hello")
	<-delivering
	h.stop()
	if cancelled != nil {
		t.Fatalf("the delivery in flight was cancelled at shutdown: %v", cancelled)
	}
	if got := h.ad.texts(); len(got) != 1 {
		t.Fatalf("delivered %q, want the one reply", got)
	}
}
