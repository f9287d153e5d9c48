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
	r.clock.set(r.pending()[0].At) // the batch's run completed "now"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.refl.Run(ctx) }()
	if d := <-r.asked; d != 30*time.Second {
		t.Fatalf("Run waits %v for a batch that just completed, want the 30s delay", d)
	}
	if n := len(reflections(srv)); n != 0 {
		t.Fatalf("reflected %d times before the delay", n)
	}
	commits := make(chan struct{}, 1)
	r.st.OnCommit(func(int, time.Duration) { poke(commits) })
	r.clock.Add(time.Hour)
	// Fire the timer Run waits on, while it waits on it; a wake-up left by the
	// run's Notify may already have let it see the moved clock (then it waits on
	// no timer), so the batch's reflection is what the test waits for: a commit.
	timeout := time.After(15 * time.Second)
	for len(r.pending()) != 0 {
		select {
		case r.fire <- time.Now():
		case <-commits:
		case <-timeout:
			t.Fatal("timed out waiting for the batch to be reflected")
		}
	}
	if n := len(reflections(srv)); n != 1 {
		t.Fatalf("reflections after the timer = %d, want 1", n)
	}

	r.clock.Add(-2 * time.Hour) // the next batch is not due
	r.say("console:b", "@engineer second")
	cancel() // the new batch is not due: shutdown flushes it
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(reflections(srv)); n != 2 || len(r.pending()) != 0 {
		t.Errorf("after shutdown: %d reflections, %d pending; want the pending batch flushed", n, len(r.pending()))
	}
}

// poke wakes a waiter on ch (nil: none) without blocking: a wake-up already
// pending is enough.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
