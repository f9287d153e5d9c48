package core

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// liveHeap collects garbage and returns the bytes of live heap objects.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The lanes of a burst are given back whole once released: not only the lanes
// but the maps that held them, which Go never shrinks by itself (memory flat
// under bursts, DESIGN.md §9). 20,000 lanes take well over 1 MiB of map; after
// the release less than 16 bytes per lane may stay.
func TestReleasedLanesGiveBackTheirMaps(t *testing.T) {
	const n = 20000
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l := &lanes{m: map[laneKey]*lane{}, inflight: map[OutboxID]bool{}, idle: laneIdle}
	before := liveHeap()
	for i := range n {
		l.m[laneKey{"telegram/bench", ConversationRef(fmt.Sprint(1_000_000 + i))}] = &lane{idleSince: start}
		l.inflight[OutboxID(i+1)] = true
		l.inflightPeak = max(l.inflightPeak, len(l.inflight)) // as offer records it
	}
	for i := range n { // delivered, as run does
		delete(l.inflight, OutboxID(i+1))
	}
	l.release(start.Add(laneIdle))
	if len(l.m) != 0 {
		t.Fatalf("%d lanes kept after the idle period, want 0", len(l.m))
	}
	after := liveHeap()
	if after > before && after-before > 16*n {
		t.Errorf("live heap grew %d bytes (%d per released lane), want under %d: the released lanes' maps were kept",
			after-before, (after-before)/n, 16*n)
	}
	runtime.KeepAlive(l)
	// A lane made after the rebuild works as before.
	k := laneKey{"telegram/bench", "again"}
	l.m[k] = &lane{idleSince: start}
	l.release(start.Add(3 * laneIdle))
	if _, ok := l.m[k]; ok {
		t.Errorf("a lane idle for the idle period was kept after the maps were rebuilt")
	}
}
