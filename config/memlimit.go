package config

// limits.memory_limit_bytes is serve's optional soft memory limit for the Go
// runtime (runtime/debug.SetMemoryLimit). Unset, the collector paces itself
// (GOGC, default 100: the heap may grow to about twice what was live), which
// spends the least CPU; a limit makes it collect more often as the heap nears
// the figure, and when the live heap is near the limit it may spend up to about
// half the CPU. GOMEMLIMIT in the environment wins over the config.

// MinMemoryLimitBytes is the lowest limit accepted: an idle openbot's Go runtime
// holds about 16 MiB, so below it the collector would never rest.
const MinMemoryLimitBytes int64 = 16 << 20

// validateMemoryLimit checks limits.memory_limit_bytes: unset (0; -1, which
// older configs used for "no limit", is the same), or at least
// MinMemoryLimitBytes.
func validateMemoryLimit(p *problems, v int64) {
	if v != 0 && v != -1 && v < MinMemoryLimitBytes {
		p.add("limits.memory_limit_bytes", "must be unset (no limit) or at least %d (16 MiB), got %d", MinMemoryLimitBytes, v)
	}
}
