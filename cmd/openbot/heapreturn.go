package main

import (
	"context"
	"runtime/debug"
	"time"

	"openbot/internal/waitctx"
)

// Returning the heap a burst left behind (DESIGN.md §9, memory flat under
// bursts). After a burst the Go heap shrinks back, but the runtime keeps the
// freed spans mapped and gives them back to the OS only slowly (its background
// scavenger), so RSS stays near the burst's peak for minutes. heapReturner
// looks every heapReturnEvery at how much free heap is still held and, past
// heapReturnAbove, returns it at once (debug.FreeOSMemory: one extra GC). In
// steady use the free heap stays small and nothing happens.

const (
	heapReturnEvery = 15 * time.Second
	heapReturnAbove = 8 << 20 // bytes of free, unreleased heap
)

// heapFreeHeld reads the bytes of heap the runtime holds free and has not
// released to the OS.
func heapFreeHeld() uint64 { return readMetrics("/memory/classes/heap/free:bytes")[0] }

// returnHeap runs until ctx is done, returning held free heap above the
// threshold every interval; free reads the held bytes and release returns
// them (heapFreeHeld and debug.FreeOSMemory in serve).
func returnHeap(ctx context.Context, every time.Duration, above uint64, free func() uint64, release func()) {
	waitctx.Every(ctx, every, func() {
		if free() > above {
			release()
		}
	})
}

// startHeapReturn is serve's heap returner, owned by ctx.
func startHeapReturn(ctx context.Context) {
	returnHeap(ctx, heapReturnEvery, heapReturnAbove, heapFreeHeld, debug.FreeOSMemory)
}
