package core

import (
	"errors"
	"testing"
)

// TestRunCancelsKeepsLaterExecution: a run abandoned with its ingest's
// transaction may share its id with the run that transaction's next attempt
// started (core/ingestgate.go); when the abandoned one ends, the later one stays
// registered, so CancelRun still interrupts it.
func TestRunCancelsKeepsLaterExecution(t *testing.T) {
	var c runCancels
	var first, second error
	a := c.add(42, func(err error) { first = err }, nil)
	c.add(42, func(err error) { second = err }, nil)
	c.remove(42, a)
	if !c.has(42) {
		t.Fatal("the abandoned execution's end removed the later one's entry")
	}
	c.cancel(42)
	if first != nil || second != errCancelled {
		t.Fatalf("cancel reached first=%v second=%v, want only the later execution", first, second)
	}
}

// TestRunCancelsAbandonedRegistersNothing: the goroutine of a run abandoned with
// its ingest's transaction may reach its registration only after the run the
// transaction's next attempt started (same id) registered; it must not replace
// that entry, or CancelRun would interrupt the dead run and miss the live one.
func TestRunCancelsAbandonedRegistersNothing(t *testing.T) {
	var c runCancels
	var late, live error
	c.add(42, func(err error) { live = err }, nil)
	g := newIngestGate()
	g.resolve(errIngestRerun)
	a := c.add(42, func(err error) { late = err }, g)
	c.remove(42, a)
	if !c.has(42) {
		t.Fatal("the abandoned execution's registration and end removed the live run's entry")
	}
	c.cancel(42)
	if late != nil || !errors.Is(live, errCancelled) {
		t.Fatalf("cancel reached abandoned=%v live=%v, want only the live run", late, live)
	}
}
