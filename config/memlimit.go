package config

import "math"

// Serve's soft memory limit (limits.memory_limit_bytes; memory flat under
// bursts, DESIGN.md §9).
//
// The product's memory budget is an RSS under 48 MiB right after a burst of
// 5,000 new conversations. About half of that RSS is file-backed and outside the
// Go runtime's reach: the pages of the binary's code and data the process has run
// (about 17 MiB) and the store's memory map, which bbolt fills as it reads and the
// store gives back between bursts (a few MiB; store/bolt/release.go). The other
// half, 24 MiB, is the Go runtime's share, and that is the default soft limit. It
// matters in bursts: the garbage collector otherwise lets the heap grow to twice
// what was live at its last cycle (GOGC=100), so a burst holding 12 MiB live
// would take 24 MiB of heap plus stacks and bookkeeping, and the heap it freed
// stays mapped for minutes. Near the limit the collector runs more often instead
// (at most about half the CPU: the limit is soft, never an out-of-memory error).
// Under the limit serve sets the GC percent to 400 (cmd/openbot/memlimit.go):
// the limit, not the percent, bounds a burst, and fewer cycles take less CPU
// from the runs. A team whose live heap is larger (long histories, big files, many bots at
// once) should raise it, or set -1 for none; GOMEMLIMIT in the environment wins
// over the config.
const (
	// DefaultMemoryLimitBytes is limits.memory_limit_bytes when it is absent or 0.
	DefaultMemoryLimitBytes int64 = 24 << 20
	// MinMemoryLimitBytes is the lowest limit accepted: an idle openbot's Go
	// runtime holds about 16 MiB, so below it the collector would never rest.
	MinMemoryLimitBytes int64 = 16 << 20
	// NoMemoryLimit is the value of limits.memory_limit_bytes that sets none.
	NoMemoryLimit int64 = -1
)

// SoftMemoryLimit is the byte limit serve gives runtime/debug.SetMemoryLimit
// for limits: MemoryLimitBytes (DefaultMemoryLimitBytes when 0), or
// math.MaxInt64 (the runtime's "no limit") when it is NoMemoryLimit.
func (l Limits) SoftMemoryLimit() int64 {
	switch l.MemoryLimitBytes {
	case NoMemoryLimit:
		return math.MaxInt64
	case 0:
		return DefaultMemoryLimitBytes
	}
	return l.MemoryLimitBytes
}

// validateMemoryLimit checks limits.memory_limit_bytes: -1, or 0 (the
// default), or at least MinMemoryLimitBytes.
func validateMemoryLimit(p *problems, v int64) {
	if v != NoMemoryLimit && v != 0 && v < MinMemoryLimitBytes {
		p.add("limits.memory_limit_bytes", "must be -1 (no limit) or at least %d (16 MiB), got %d", MinMemoryLimitBytes, v)
	}
}
