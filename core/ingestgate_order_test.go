package core

import (
	"context"
	"errors"
	"testing"
)

// TestIngestGateFailsAfterItsCallbacks: a run that sees its ingest failed (the
// gate's wait returns) has already been stopped by what whenResolved registered
// (execute cancels the run's context there), so code that goes on after a
// refused write (a resumed run ignores a failed checkpoint) finds its context
// ended and starts no model call or tool after the failed commit.
func TestIngestGateFailsAfterItsCallbacks(t *testing.T) {
	g := newIngestGate()
	inCallback, release := make(chan struct{}), make(chan struct{})
	g.whenResolved(func(error) {
		close(inCallback)
		<-release
	})
	resolved := make(chan struct{})
	go func() {
		g.resolve(errors.New("disk full"))
		close(resolved)
	}()
	<-inCallback
	if !g.open() {
		close(release)
		t.Fatal("the gate showed the failure before its callbacks (the run's cancel) had returned")
	}
	close(release)
	<-resolved
	if err := g.wait(context.Background()); !errors.Is(err, errNotIngested) {
		t.Fatalf("wait = %v, want errNotIngested", err)
	}
	// A callback registered after the outcome runs at once.
	var got error
	g.whenResolved(func(err error) { got = err })
	if got == nil {
		t.Fatal("whenResolved after the failure did not call its function with the error")
	}
}
