package config

import (
	"math"
	"testing"
)

// limits.memory_limit_bytes: absent is the 24 MiB default, a value is kept,
// -1 is no limit (math.MaxInt64 for runtime/debug.SetMemoryLimit).
func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        int64
	}{
		{"default", "", 24 << 20},
		{"set", "limits: {memory_limit_bytes: 67108864}\n", 64 << 20},
		{"off", "limits: {memory_limit_bytes: -1}\n", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseOK(t, minimal+tc.extra, nil)
			if got := cfg.Limits.SoftMemoryLimit(); got != tc.want {
				t.Errorf("SoftMemoryLimit() = %d, want %d (memory_limit_bytes %d)", got, tc.want, cfg.Limits.MemoryLimitBytes)
			}
		})
	}
	if got := (Limits{}).SoftMemoryLimit(); got != DefaultMemoryLimitBytes {
		t.Errorf("SoftMemoryLimit of limits never defaulted = %d, want the default %d", got, DefaultMemoryLimitBytes)
	}
}
