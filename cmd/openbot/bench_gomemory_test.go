package main

import (
	"fmt"
	"runtime/metrics"
	"strings"
)

// goMemory is where the Go runtime's memory is, from runtime/metrics
// (/memory/classes/...): what of the anonymous RSS is live heap, heap the GC has
// not reused or returned yet, goroutine stacks and the runtime's own bookkeeping
// (memory flat under bursts, DESIGN.md §9). The bench prints it. Bytes.
type goMemory struct {
	objects    uint64 // heap objects, live and not yet swept
	unused     uint64 // heap spans in use but not holding objects (fragmentation)
	free       uint64 // free heap still mapped (not returned to the OS)
	stacks     uint64 // goroutine stacks (heap/stacks and os-stacks)
	other      uint64 // runtime metadata, profiling buckets and the rest
	total      uint64 // everything the runtime mapped and did not release
	goroutines uint64 // live goroutines
}

// goMemoryClasses is the runtime/metrics names goMemory reads, in order.
var goMemoryClasses = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/sched/goroutines:goroutines",
}

// readGoMemory reads goMemory now.
func readGoMemory() goMemory {
	v := readMetrics(goMemoryClasses...)
	m := goMemory{objects: v[0], unused: v[1], free: v[2], stacks: v[3] + v[4], goroutines: v[7]}
	if v[5] > v[6] {
		m.total = v[5] - v[6]
	}
	if used := m.objects + m.unused + m.free + m.stacks; m.total > used {
		m.other = m.total - used
	}
	return m
}

// String is the breakdown in MiB, as the bench prints it.
func (m goMemory) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Go %s = heap objects %s, unused %s, free %s, stacks %s, other %s; %d goroutines",
		heapMiB(m.total), heapMiB(m.objects), heapMiB(m.unused), heapMiB(m.free), heapMiB(m.stacks), heapMiB(m.other), m.goroutines)
	return b.String()
}

// readMetrics reads runtime/metrics samples by name, in order; a sample that is
// not a uint64 (unknown to this runtime) reads 0.
func readMetrics(names ...string) []uint64 {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return v
}
