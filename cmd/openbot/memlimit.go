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
	// setGC is runtime/debug.SetGCPercent (nil: the GC percent is left alone);
	// gcFromEnv says GOGC is set in the environment, which then wins.
	setGC     func(int) int
	gcFromEnv bool

	mu      sync.Mutex
	prev    int64 // the limit before the first apply
	applied bool  // prev is set
	// follow is set when the limit is the default, which rises with the live
	// heap (raise).
	follow    bool
	cur       int64 // the limit in force as this type last set it
	prevGC    int   // the GC percent before the first apply that set one
	gcApplied bool  // prevGC is set
}

// newMemoryLimit reads GOMEMLIMIT through lookupEnv; set is
// runtime/debug.SetMemoryLimit outside tests.
func newMemoryLimit(lookupEnv config.LookupEnv, set func(int64) int64, log *slog.Logger) *memoryLimit {
	m := &memoryLimit{set: set, log: log}
	if v, ok := lookupEnv("GOMEMLIMIT"); ok && v != "" {
		m.fromEnv = v
	}
	if v, ok := lookupEnv("GOGC"); ok && v != "" {
		m.gcFromEnv = true
	}
	return m
}

// serveMemoryLimit is the memoryLimit of `openbot serve` and `openbot bench`.
func serveMemoryLimit(lookupEnv config.LookupEnv, log *slog.Logger) *memoryLimit {
	m := newMemoryLimit(lookupEnv, debug.SetMemoryLimit, log)
	m.setGC = debug.SetGCPercent
	return m
}

// limitedGCPercent is the collector's GC percent (GOGC) under a soft memory
// limit. The default, 100, collects whenever the heap has doubled since the
// last cycle, which at 100 msg/s and a live heap of a few MiB is 20 and more
// cycles a second; each takes CPU from the runs on hand (at 100 msg/s on two
// cores, the latency's p99 is about 1.5 ms lower with no collection at all).
// Under a limit the heap may grow to five times the live heap between cycles
// instead, which with the few MiB live at 100 msg/s is past what the default
// 24 MiB limit leaves the heap (a goal of about 12 MiB): the limit, not the
// percent, then decides when a cycle starts and bounds a burst's memory, with
// about a third fewer cycles than at 200. With no limit
// (limits.memory_limit_bytes: -1) the runtime's default stays; GOGC in the
// environment wins over both.
const limitedGCPercent = 400

// applyGC sets the GC percent for limit (math.MaxInt64: none), unless GOGC is
// set in the environment or setGC is nil; m.mu held.
func (m *memoryLimit) applyGC(limit int64) {
	if m.setGC == nil || m.gcFromEnv {
		return
	}
	pct := limitedGCPercent
	if limit == math.MaxInt64 {
		pct = 100
	}
	old := m.setGC(pct)
	if !m.gcApplied {
		m.prevGC, m.gcApplied = old, true
	}
}

// apply sets the soft limit of l (config.Limits.SoftMemoryLimit) unless
// GOMEMLIMIT is set, and the GC percent that goes with the limit in force
// (limitedGCPercent) unless GOGC is set, and logs the limit and where it comes
// from.
func (m *memoryLimit) apply(l config.Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fromEnv != "" {
		m.log.Info("soft memory limit from the environment; limits.memory_limit_bytes is not used", "GOMEMLIMIT", m.fromEnv)
		m.applyGC(m.set(-1)) // the limit the runtime took from GOMEMLIMIT
		return
	}
	limit := l.SoftMemoryLimit()
	m.follow, m.cur = l.MemoryLimitBytes == 0, limit
	old := m.set(limit)
	if !m.applied {
		m.prev, m.applied = old, true
	}
	m.applyGC(limit)
	if limit == math.MaxInt64 {
		m.log.Info("no soft memory limit (limits.memory_limit_bytes: -1)")
		return
	}
	m.log.Info("soft memory limit", "bytes", limit, "MiB", limit>>20, "from", "limits.memory_limit_bytes")
}

// restore puts back the limit and the GC percent the process had before the
// first apply.
func (m *memoryLimit) restore() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied {
		m.set(m.prev)
		m.applied = false
	}
	if m.gcApplied {
		m.setGC(m.prevGC)
		m.gcApplied = false
	}
}

// limiterEvery is how often serve looks whether the collector hit its CPU cap.
const limiterEvery = 15 * time.Second

// gcLimiterCycle reads the GC cycle in which the runtime last capped the
// collector's CPU (0: never): it does so when a soft memory limit is too low for
// the live heap, and the collector would otherwise run all the time.
func gcLimiterCycle() uint64 { return readMetrics("/gc/limiter/last-enabled:gc-cycle")[0] }

// watchLimiter warns, at each tick after which cycle (gcLimiterCycle) moved,
// that the collector ran at its CPU cap to stay under the soft memory limit, so
// the operator raises limits.memory_limit_bytes, and then calls capped (nil:
// none); it returns when ctx is done.
func watchLimiter(ctx context.Context, tick <-chan time.Time, cycle func() uint64, log *slog.Logger, capped func()) {
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
				if capped != nil {
					capped()
				}
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
	watchLimiter(ctx, t.C, gcLimiterCycle, m.log, func() { m.raise(runtimeMemory()) })
}

// The default limit makes room for a larger live heap. 24 MiB caps a small
// heap's headroom, which is what keeps a burst's RSS flat; but a team whose live
// heap is larger (long histories, big files, many bots at once) would have the
// collector running at its CPU cap all the time. So when the collector hit its
// cap under the default limit (watchLimiter), the limit is raised to half the
// live heap above it plus the runtime's own memory (stacks, metadata): from then
// on the collector does about twice its default work (GOGC=50 instead of 100),
// not the cap. It is never lowered again (lowering it below the memory in use
// would start a collection at the cap at once) until a reload applies the config
// anew. A limit set in the config, or in GOMEMLIMIT, is kept as given.

// limitRaiseSlack is the smallest raise made, in bytes.
const limitRaiseSlack = 1 << 20

// raise lifts the default limit to live*3/2 + other when that is higher, live
// being the heap live at the last GC and other the runtime's memory outside the
// heap, both in bytes; a limit from the config or the environment is not
// changed.
func (m *memoryLimit) raise(live, other uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.applied || !m.follow || m.fromEnv != "" {
		return
	}
	want := int64(live + live/2 + other)
	if want-m.cur < limitRaiseSlack {
		return
	}
	m.cur = want
	m.set(want)
	m.log.Info("soft memory limit raised for the live heap", "bytes", want, "MiB", want>>20, "live_heap_bytes", live)
}

// runtimeMemory reads the heap live at the last GC and the Go runtime's memory
// outside the heap (stacks, metadata, other), in bytes.
func runtimeMemory() (live, other uint64) {
	g := readGoMemory()
	return readMetrics("/gc/heap/live:bytes")[0], g.stacks + g.other
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
