package config

import (
	"testing"

	"openbot/core"
)

// TestLimitDefaultsAreCores: an absent limits section gives the engine's own
// defaults, so the config file and core cannot disagree on one.
func TestLimitDefaultsAreCores(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	l := c.Limits
	got := core.Limits{MaxConcurrentRuns: l.MaxConcurrentRuns, MaxBotHops: l.MaxBotHops,
		MaxModelCallsPerRun: l.MaxModelCallsPerRun, HistoryTokenBudget: l.HistoryTokenBudget,
		HistoryMaxMessages: l.HistoryMaxMessages, RunTimeout: l.RunTimeout}
	if want := (core.Limits{}).WithDefaults(); got != want {
		t.Errorf("config limits defaults = %+v, want core's %+v", got, want)
	}
	if c.ApprovalTimeout != core.DefaultApprovalTimeout {
		t.Errorf("approval_timeout default = %v, want core's %v", c.ApprovalTimeout, core.DefaultApprovalTimeout)
	}
}
