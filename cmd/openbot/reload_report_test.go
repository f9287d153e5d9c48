package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/config"
)

// TestReloadReportNamesEveryChange: a reload that changes only cost, only
// reply_to_unaddressed, only schedules or only retention never answers
// "nothing changed": the first two are applied and named, the last two are
// named as "restart to apply" (the schedule runner and pruner are built at start).
func TestReloadReportNamesEveryChange(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{Telegram: []config.Telegram{{Name: "team"}}}
	}
	cases := []struct {
		name    string
		change  func(c *config.Config)
		applied string
		restart string
	}{
		{"cost", func(c *config.Config) { c.Cost.Budgets.Thread.Tokens = 1000 }, "cost", ""},
		{"reply", func(c *config.Config) { c.Telegram[0].ReplyToUnaddressed = config.ReplyAlways }, "reply_to_unaddressed", ""},
		{"schedules", func(c *config.Config) {
			c.Schedules = []config.Schedule{{Name: "daily", Cron: "@daily", Bot: "a", Account: "console/local", Prompt: "hi"}}
		}, "", "schedules"},
		{"retention", func(c *config.Config) { c.Retention.Activity = 48 * time.Hour }, "", "retention"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, cfg := base(), base()
			tc.change(cfg)
			applied := appliedChanges(old, cfg)
			restart := restartKeys(old, cfg)
			if tc.applied != "" && !strings.Contains(strings.Join(applied, "; "), tc.applied) {
				t.Errorf("applied changes %q do not name %s", applied, tc.applied)
			}
			if tc.restart != "" && !slices.Contains(restart, tc.restart) {
				t.Errorf("restart keys %q do not name %s", restart, tc.restart)
			}
			if len(applied)+len(restart) == 0 {
				t.Errorf("a %s change is reported as nothing changed", tc.name)
			}
		})
	}
}
