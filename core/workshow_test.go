package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// blockingWork is a WorkIndicator whose start call blocks until release is closed
// or its context ends; it records what happened, in order.
type blockingWork struct {
	*recAdapter
	release <-chan struct{}
	mu      sync.Mutex
	events  []string
}

func (b *blockingWork) note(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, s)
}

func (b *blockingWork) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

func (b *blockingWork) Working(ctx context.Context, w core.Work) {
	if !w.Started {
		b.note("end")
		return
	}
	b.note("start")
	select {
	case <-b.release:
		b.note("start released")
	case <-ctx.Done():
		select {
		case <-b.release: // both ready: the release came first
			b.note("start released")
		default:
			switch {
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				b.note("start timed out")
			default:
				b.note("start cancelled")
			}
		}
	}
	b.note("start returned")
}

// TestWorkIndicatorStartDoesNotDelayRun: the platform call that shows a bot at
// work runs beside the run, so a start call that has not returned yet does not
// hold back the model request (the agent is called while it blocks), and the end
// is sent only after the start call returned.
func TestWorkIndicatorStartDoesNotDelayRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	called := make(chan struct{})
	var once sync.Once
	h.agent.reply["chief_of_staff"] = func(context.Context, *core.Job) (string, error) {
		once.Do(func() { close(called) })
		return "done", nil
	}
	bw := &blockingWork{recAdapter: h.ad, release: called}
	h.start2(bw)
	h.say("hello")
	h.idle()
	want := []string{"start", "start released", "start returned", "end"}
	if got := bw.log(); !slices.Equal(got, want) {
		t.Fatalf("work indicator calls = %q, want %q (the run waited for the start call)", got, want)
	}
}

// TestWorkIndicatorShutdownBounded: a start call that blocks until its context
// ends is cancelled with the run at shutdown instead of running out its own
// timeout, and the end still follows it.
func TestWorkIndicatorShutdownBounded(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) { o.ShutdownGrace = 50 * time.Millisecond }
	running := make(chan struct{})
	var once sync.Once
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, _ *core.Job) (string, error) {
		once.Do(func() { close(running) })
		<-ctx.Done() // in flight until shutdown cancels it
		return "", ctx.Err()
	}
	bw := &blockingWork{recAdapter: h.ad} // never released: only its context ends it
	h.start2(bw)
	h.say("hello")
	<-running
	h.stop()
	want := []string{"start", "start cancelled", "start returned", "end"}
	if got := bw.log(); !slices.Equal(got, want) {
		t.Fatalf("work indicator calls = %q, want %q", got, want)
	}
}
