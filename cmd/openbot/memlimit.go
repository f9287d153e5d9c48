package main

import (
	"log/slog"
	"math"
	"runtime/debug"
	"sync"

	"openbot/config"
)

// memoryLimit is serve's soft memory limit (limits.memory_limit_bytes, memory
// flat under bursts, DESIGN.md §9; why 24 MiB by default: config/memlimit.go):
// serve applies it at start and at every reload, and puts back the limit the
// process had when it stops (tests and the bench run serve in-process). When the
// operator set GOMEMLIMIT in the environment, the runtime has applied that and
// the config is not used: the environment wins.
type memoryLimit struct {
	fromEnv string            // GOMEMLIMIT as set in the environment ("" when unset)
	set     func(int64) int64 // runtime/debug.SetMemoryLimit; a negative argument only reads
	log     *slog.Logger

	mu      sync.Mutex
	prev    int64 // the limit before the first apply
	applied bool  // prev is set
}

// newMemoryLimit reads GOMEMLIMIT through lookupEnv; set is
// runtime/debug.SetMemoryLimit outside tests.
func newMemoryLimit(lookupEnv config.LookupEnv, set func(int64) int64, log *slog.Logger) *memoryLimit {
	m := &memoryLimit{set: set, log: log}
	if v, ok := lookupEnv("GOMEMLIMIT"); ok && v != "" {
		m.fromEnv = v
	}
	return m
}

// serveMemoryLimit is the memoryLimit of `openbot serve` and `openbot bench`.
func serveMemoryLimit(lookupEnv config.LookupEnv, log *slog.Logger) *memoryLimit {
	return newMemoryLimit(lookupEnv, debug.SetMemoryLimit, log)
}

// apply sets the soft limit of l (config.Limits.SoftMemoryLimit) unless
// GOMEMLIMIT is set, and logs the limit in force and where it comes from.
func (m *memoryLimit) apply(l config.Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fromEnv != "" {
		m.log.Info("soft memory limit from the environment; limits.memory_limit_bytes is not used", "GOMEMLIMIT", m.fromEnv)
		return
	}
	limit := l.SoftMemoryLimit()
	old := m.set(limit)
	if !m.applied {
		m.prev, m.applied = old, true
	}
	if limit == math.MaxInt64 {
		m.log.Info("no soft memory limit (limits.memory_limit_bytes: -1)")
		return
	}
	m.log.Info("soft memory limit", "bytes", limit, "MiB", limit>>20, "from", "limits.memory_limit_bytes")
}

// restore puts back the limit the process had before the first apply.
func (m *memoryLimit) restore() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied {
		m.set(m.prev)
		m.applied = false
	}
}
