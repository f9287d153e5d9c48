package main

import (
	"log/slog"
	"runtime/debug"
	"sync"

	"openbot/config"
)

// memoryLimit is serve's optional soft memory limit (limits.memory_limit_bytes,
// config/memlimit.go): unset, the Go runtime paces its collector alone. Serve
// applies it at start and at every reload, and puts back the limit the process
// had when it stops (tests and the bench run serve in-process). When the
// operator set GOMEMLIMIT in the environment, the runtime has applied that and
// the config is not used: the environment wins.
type memoryLimit struct {
	fromEnv string            // GOMEMLIMIT as set in the environment ("" when unset)
	set     func(int64) int64 // runtime/debug.SetMemoryLimit
	log     *slog.Logger

	mu      sync.Mutex
	prev    int64 // the limit before the first apply that set one
	applied bool  // prev is set, and a limit from the config is in force
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

// serveMemoryLimit is the memoryLimit of `openbot serve` (and of BenchmarkPlatform).
func serveMemoryLimit(lookupEnv config.LookupEnv, log *slog.Logger) *memoryLimit {
	return newMemoryLimit(lookupEnv, debug.SetMemoryLimit, log)
}

// apply sets the soft limit of l unless GOMEMLIMIT is set; with none
// configured it puts back the process's own (a reload that removed the key).
func (m *memoryLimit) apply(l config.Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.fromEnv != "":
		if l.MemoryLimitBytes > 0 {
			m.log.Info("soft memory limit from the environment; limits.memory_limit_bytes is not used", "GOMEMLIMIT", m.fromEnv)
		}
	case l.MemoryLimitBytes > 0:
		old := m.set(l.MemoryLimitBytes)
		if !m.applied {
			m.prev, m.applied = old, true
		}
		m.log.Info("soft memory limit", "bytes", l.MemoryLimitBytes, "MiB", l.MemoryLimitBytes>>20, "from", "limits.memory_limit_bytes")
	default:
		m.restoreLocked()
	}
}

// restore puts back the limit the process had before the first apply.
func (m *memoryLimit) restore() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restoreLocked()
}

func (m *memoryLimit) restoreLocked() {
	if m.applied {
		m.set(m.prev)
		m.applied = false
	}
}
