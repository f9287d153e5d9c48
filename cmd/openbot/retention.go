package main

import (
	"log/slog"

	"openbot/config"
	"openbot/core"
)

// newPruner maps the retention section onto the pruner that serve runs beside
// the engine (DESIGN.md §10 "retention"). st must implement core.Pruning (the
// bbolt store does).
func newPruner(cfg *config.Config, st core.Pruning, log *slog.Logger) (*core.Pruner, error) {
	r := cfg.Retention
	return core.NewPruner(core.PrunerOptions{
		Store: st,
		Retention: core.Retention{
			RunEvents: r.RunEvents, Activity: r.Activity, Outbox: r.Outbox,
			DedupKeys: r.DedupKeys, IdleThreadMessages: r.IdleThreadMessages,
		},
		Interval: r.Interval,
		Logger:   log,
	})
}
