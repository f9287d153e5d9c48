package agents_test

import (
	"context"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

// TestReflectorRunDebouncesAndFlushes drives Reflector.Run: a pending batch
// waits for its delay (the timer is the test's), is reflected when the timer
// fires, and a batch not yet due is flushed when Run's context ends.
func TestReflectorRunDebouncesAndFlushes(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			return openaitest.Text(`{"operations": []}`)
		}
		return openaitest.Text("ok")
	})
	r := newMemRig(t, srv, "", false, memBot)
	r.say("console:a", "@engineer first")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.refl.Run(ctx) }()
	if d := <-r.asked; d <= 0 || d > 31*time.Second {
		t.Fatalf("Run waits %v for a batch that just completed, want about the 30s delay", d)
	}
	if n := len(reflections(srv)); n != 0 {
		t.Fatalf("reflected %d times before the delay", n)
	}
	r.clock.Add(time.Hour)
	r.fire <- time.Now()
	waitFor(t, "the batch to be reflected", func() bool { return len(r.pending()) == 0 })
	if n := len(reflections(srv)); n != 1 {
		t.Fatalf("reflections after the timer = %d, want 1", n)
	}

	r.clock.Add(-2 * time.Hour) // the next batch is not due
	r.say("console:b", "@engineer second")
	<-r.asked // Notify woke Run, which now waits for the new batch
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(reflections(srv)); n != 2 || len(r.pending()) != 0 {
		t.Errorf("after shutdown: %d reflections, %d pending; want the pending batch flushed", n, len(r.pending()))
	}
}
