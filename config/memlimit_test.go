package config

import "testing"

// limits.memory_limit_bytes: absent is no limit (0, no default), a value is
// kept, and -1 (older configs' "no limit") is accepted.
func TestMemoryLimitBytes(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        int64
	}{
		{"unset", "", 0},
		{"set", "limits: {memory_limit_bytes: 67108864}\n", 64 << 20},
		{"none", "limits: {memory_limit_bytes: -1}\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseOK(t, minimal+tc.extra, nil)
			if got := cfg.Limits.MemoryLimitBytes; got != tc.want {
				t.Errorf("MemoryLimitBytes = %d, want %d", got, tc.want)
			}
		})
	}
}
