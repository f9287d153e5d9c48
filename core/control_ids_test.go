package core

import (
	"testing"
)

// TestRunCancelsKeepsLaterExecution: a run abandoned with its ingest's
// transaction may share its id with the run that transaction's next attempt
// started (core/ingestgate.go); when the abandoned one ends, the later one stays
// registered, so CancelRun still interrupts it.
func TestRunCancelsKeepsLaterExecution(t *testing.T) {
	var c runCancels
	var first, second error
	a := c.add(42, func(err error) { first = err })
	c.add(42, func(err error) { second = err })
	c.remove(42, a)
	if !c.has(42) {
		t.Fatal("the abandoned execution's end removed the later one's entry")
	}
	c.cancel(42)
	if first != nil || second != errCancelled {
		t.Fatalf("cancel reached first=%v second=%v, want only the later execution", first, second)
	}
}
