package main

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// TestReturnHeapOnlyAboveThreshold: the returner releases only while the held
// free heap is above its threshold, and stops with its context.
func TestReturnHeapOnlyAboveThreshold(t *testing.T) {
	var held atomic.Uint64
	var releases atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	released := make(chan struct{}, 16)
	go func() {
		defer close(done)
		returnHeap(ctx, time.Millisecond, 100, held.Load, func() {
			releases.Add(1)
			held.Store(0)
			released <- struct{}{}
		})
	}()
	time.Sleep(20 * time.Millisecond) // many ticks below the threshold
	if n := releases.Load(); n != 0 {
		t.Fatalf("%d releases below the threshold, want none", n)
	}
	held.Store(101)
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("no release above the threshold")
	}
	cancel()
	<-done
	if n := releases.Load(); n != 1 {
		t.Errorf("%d releases, want 1 (the held heap was returned)", n)
	}
}

// TestHeapFreeHeldFallsAfterRelease: the runtime metric the returner reads is
// the free heap FreeOSMemory gives back.
func TestHeapFreeHeldFallsAfterRelease(t *testing.T) {
	junk := make([][]byte, 0, 64)
	for range 64 {
		junk = append(junk, make([]byte, 256<<10))
	}
	junk = nil
	_ = junk
	debug.FreeOSMemory()
	if got := heapFreeHeld(); got > heapReturnAbove {
		t.Errorf("free heap held after FreeOSMemory: %d bytes, want at most %d", got, heapReturnAbove)
	}
}
