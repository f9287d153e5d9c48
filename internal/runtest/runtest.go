// Package runtest runs a long-lived component's Run(ctx) error for a test
// (STYLE.md "Long-lived components"): in a goroutine the test owns, until the
// test ends or it stops it, with the join waited for with a bound; and the
// small waits and calls such tests share (Buffer.WaitFor, Poll, Do).
package runtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
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

// Buffer is a bytes.Buffer safe for the concurrent writes of a component a
// test runs (its logger, its output) and the test's reads; WaitFor waits for
// what was written. The zero value is ready to use.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed on the next write; nil when nobody waits
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits until text was written, failing t after 10 s.
func (s *Buffer) WaitFor(t testing.TB, text string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch, got := s.changed, s.b.String()
		s.mu.Unlock()
		if strings.Contains(got, text) {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("never written: %q; written:\n%s", text, got)
		}
	}
}

// Poll calls cond every 10 ms until it holds, failing t after limit with what
// it waited for. It is for states nothing signals (what a test reads from
// outside as an operator or a platform would: /healthz, a log file, a process
// in /proc); where an event exists, a test waits on that instead.
func Poll(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Do sends req with http.DefaultClient and returns the answer's status and
// body, failing t when no answer comes (a refused connection, a cancelled
// request).
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
