package main

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

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

// limiterEvery is how often serve looks whether the collector hit its CPU cap.
const limiterEvery = 15 * time.Second

// gcLimiterCycle reads the GC cycle in which the runtime last capped the
// collector's CPU (0: never): it does so when a soft memory limit is too low for
// the live heap, and the collector would otherwise run all the time.
func gcLimiterCycle() uint64 {
	s := []metrics.Sample{{Name: "/gc/limiter/last-enabled:gc-cycle"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watchLimiter warns, at each tick after which cycle (gcLimiterCycle) moved,
// that the collector ran at its CPU cap to stay under the soft memory limit, so
// the operator raises limits.memory_limit_bytes; it returns when ctx is done.
func watchLimiter(ctx context.Context, tick <-chan time.Time, cycle func() uint64, log *slog.Logger) {
	last := cycle()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if c := cycle(); c != last {
				last = c
				log.Warn("the garbage collector ran at its CPU cap to keep under the soft memory limit; raise limits.memory_limit_bytes (or GOMEMLIMIT)",
					"limit_bytes", debug.SetMemoryLimit(-1), "gc_cycle", c)
			}
		}
	}
}

// watch runs watchLimiter every limiterEvery until ctx is done, when this
// process applied a limit from the config (not GOMEMLIMIT, not none).
func (m *memoryLimit) watch(ctx context.Context) {
	m.mu.Lock()
	on := m.applied && m.fromEnv == ""
	m.mu.Unlock()
	if !on {
		return
	}
	t := time.NewTicker(limiterEvery)
	defer t.Stop()
	watchLimiter(ctx, t.C, gcLimiterCycle, m.log)
}
