package agents

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRegistryReadiness(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(stubTool("shell")); err != nil {
		t.Fatal(err)
	}
	r.Expect("gh", "fs")
	if got := r.SourcesOf([]string{"shell", "gh", "fs__*", "fs__read", "zz__x"}); len(got) != 2 || got[0] != "fs" || got[1] != "gh" {
		t.Fatalf("SourcesOf = %v, want [fs gh]", got)
	}
	// Built-ins and undeclared sources are never waited for.
	if u := r.WaitReady(context.Background(), []string{"shell", "zz__x"}, time.Hour); len(u) != 0 {
		t.Fatalf("WaitReady(built-ins) = %v", u)
	}
	// Without a timeout nothing waits: starting sources come back unready.
	if u := r.WaitReady(context.Background(), []string{"gh"}, -1); len(u) != 1 || u[0].Source != "gh" || u[0].Reason != nil {
		t.Fatalf("WaitReady(no wait) = %v", u)
	}

	done := make(chan []Unready, 1)
	go func() { done <- r.WaitReady(context.Background(), []string{"gh__*", "fs"}, time.Hour) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := r.WaitWaiting(wctx, 1); err != nil {
		t.Fatalf("WaitReady never waited: %v", err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__pr")}); err != nil {
		t.Fatal(err)
	}
	r.SourceFailed("fs", errors.New("its command was not found"))
	u := <-done
	if len(u) != 1 || u[0].Source != "fs" || u[0].Reason == nil || u[0].Error() != "fs is not available: its command was not found" {
		t.Fatalf("WaitReady = %v, want fs failed with its reason", u)
	}
	if r.Waiting() != 0 {
		t.Fatalf("Waiting = %d after the wait", r.Waiting())
	}
	if declared, ready, _ := r.SourceStatus("gh"); !declared || !ready {
		t.Fatalf("gh declared %v ready %v", declared, ready)
	}
	// Withdrawn tools (nil) make a source starting again; an empty list is ready.
	if err := r.SetSource("gh", nil); err != nil {
		t.Fatal(err)
	}
	if _, ready, _ := r.SourceStatus("gh"); ready {
		t.Fatal("gh ready after its tools were withdrawn")
	}
	if err := r.SetSource("gh", []Tool{}); err != nil {
		t.Fatal(err)
	}
	if _, ready, _ := r.SourceStatus("gh"); !ready {
		t.Fatal("gh with an empty tool list is not ready")
	}
	// The wait ends with ctx, reporting what is still starting.
	r.Expect("gh")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if u := r.WaitReady(ctx, []string{"gh"}, time.Hour); len(u) != 1 || u[0].Reason != nil {
		t.Fatalf("WaitReady(cancelled) = %v", u)
	}
}

// TestRegistryForget: a forgotten source's tools are gone and runs no longer
// wait for it or hear that it failed.
func TestRegistryForget(t *testing.T) {
	r := NewRegistry()
	r.Expect("gh")
	if err := r.SetSource("gh", []Tool{stubTool("gh__issues")}); err != nil {
		t.Fatal(err)
	}
	r.Forget("gh")
	if _, ok := r.Get("gh__issues"); ok {
		t.Fatal("a forgotten source's tool is still registered")
	}
	if declared, _, _ := r.SourceStatus("gh"); declared {
		t.Fatal("a forgotten source is still declared")
	}
	if un := r.WaitReady(context.Background(), []string{"gh"}, time.Second); len(un) != 0 {
		t.Fatalf("WaitReady = %v, want nothing to wait for", un)
	}
}
