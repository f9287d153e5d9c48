package agents

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// StallError is the error of a model request that received nothing for the
// provider's idle timeout (Provider.IdleTimeout): before the response headers, or
// between two reads of the streamed body. The transport retries a request that
// stalled before its headers like a network error; callModel repeats a call whose
// stream stalled midway. Both use the same retry budget (DefaultModelRetries).
type StallError struct {
	Idle      time.Duration // the idle timeout that ran out
	MidStream bool          // the response had started (headers or some events arrived)
}

// Error implements error.
func (e *StallError) Error() string {
	if e.MidStream {
		return fmt.Sprintf("the model stopped sending its answer: nothing arrived for %s", e.Idle)
	}
	return fmt.Sprintf("the model did not start answering: nothing arrived for %s", e.Idle)
}

// watchdog aborts one request attempt when no bytes arrive for idle: its timer
// cancels the attempt's context, and kick re-arms it whenever data arrives. A nil
// *watchdog does nothing (no idle timeout configured).
type watchdog struct {
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

// startWatchdog derives the attempt's context from ctx and arms the timer. With
// idle <= 0 it returns ctx and a nil watchdog.
func startWatchdog(ctx context.Context, idle time.Duration) (context.Context, *watchdog) {
	if idle <= 0 {
		return ctx, nil
	}
	actx, cancel := context.WithCancel(ctx)
	w := &watchdog{idle: idle, cancel: cancel}
	w.timer = time.AfterFunc(idle, func() {
		w.fired.Store(true)
		cancel()
	})
	return actx, w
}

// kick re-arms the timer: data arrived.
func (w *watchdog) kick() {
	if w != nil && !w.fired.Load() {
		w.timer.Reset(w.idle)
	}
}

// stop disarms the timer and releases the attempt's context.
func (w *watchdog) stop() {
	if w != nil {
		w.timer.Stop()
		w.cancel()
	}
}

// stalled reports whether the timer ran out.
func (w *watchdog) stalled() bool { return w != nil && w.fired.Load() }

// idleBody is a response body watched by a watchdog: every read that returns data
// re-arms it; a read cut off by it returns a *StallError; Close stops it.
type idleBody struct {
	rc io.ReadCloser
	w  *watchdog
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.kick()
	}
	if err != nil && err != io.EOF && b.w.stalled() {
		return n, &StallError{Idle: b.w.idle, MidStream: true}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.w.stop()
	return b.rc.Close()
}
