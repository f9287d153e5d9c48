// Package waitctx holds the waits every long-lived goroutine of openbot
// makes: a pause that ends early when its context does, a wait for a channel
// to close that ends early the same way, and a periodic task that stops with
// its context (every goroutine has an owner and a bounded
// shutdown, STYLE.md).
package waitctx

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done; it returns ctx.Err() in that case, else
// nil. A d of zero or less returns at once (ctx.Err() if ctx is already done).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Every calls fn every d (which must be positive) until ctx is done; the first
// call is d after Every starts. It returns when ctx is done, never during fn.
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Closed waits until ch is closed (at once for a nil ch) or ctx is done; it
// reports whether ch was closed first.
func Closed(ctx context.Context, ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
