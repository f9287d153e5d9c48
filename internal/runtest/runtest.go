// Package runtest runs a long-lived component's Run(ctx) error for a test
// (STYLE.md "Long-lived components"): in a goroutine the test owns, until the
// test ends or it stops it, with the join waited for with a bound.
package runtest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Bound is how long stop waits for Run to return after cancelling it.
const Bound = 30 * time.Second

// Start runs run in a goroutine with a context it returns. stop cancels that
// context and waits, at most Bound, for run to return, reporting a non-nil
// error (other than one after cancelling) or a run that did not return as
// test errors; it is idempotent and also runs when the test ends.
func Start(t testing.TB, run func(context.Context) error) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && err != context.Canceled {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(Bound):
				t.Error("Run did not return after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return ctx, stop
}
