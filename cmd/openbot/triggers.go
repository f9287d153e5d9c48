package main

import (
	"fmt"
	"log/slog"

	"openbot/adapters/hooks"
	"openbot/config"
	"openbot/core"
)

// hookTriggers maps the triggers section onto hooks.Trigger values, building
// each target conversation with its adapter's own id codec.
func hookTriggers(cfg *config.Config) ([]hooks.Trigger, error) {
	out := make([]hooks.Trigger, 0, len(cfg.Triggers))
	for i, t := range cfg.Triggers {
		ht := hooks.Trigger{Name: t.Name, Kind: t.Kind, Secret: t.Secret, Bot: t.Bot, Thread: t.Thread,
			Events: t.Events, When: t.When, Message: t.Message, RunsPer: t.RateLimit.Runs, Per: t.RateLimit.Per,
			MaxRunsPerDay: t.MaxRunsPerDay, MaxBody: t.MaxBodyBytes, Window: t.Window}
		var err error
		ht.Account, ht.Platform, ht.Conversation, err = targetConversation(t.PostTo.Account, t.PostTo.Conversation, t.PostTo.Team, t.PostTo.Topic)
		if err != nil {
			return nil, fmt.Errorf("triggers[%d].post_to: %w", i, err)
		}
		out = append(out, ht)
	}
	return out, nil
}

// newHooks builds the /hooks/ server of the configured triggers (every
// request under /hooks/ is refused alike when there are none).
func newHooks(cfg *config.Config, eng *core.Engine, log *slog.Logger) (*hooks.Server, error) {
	ts, err := hookTriggers(cfg)
	if err != nil {
		return nil, err
	}
	return hooks.New(hooks.Options{Engine: eng, Triggers: ts, Logger: log})
}

// notifyTargets maps the notify section onto core.NotifyTarget values.
func notifyTargets(cfg *config.Config) ([]core.NotifyTarget, error) {
	out := make([]core.NotifyTarget, 0, len(cfg.Notify))
	for i, n := range cfg.Notify {
		nt := core.NotifyTarget{Name: n.Name, Bots: n.Bots}
		var err error
		nt.Account, nt.Platform, nt.Conversation, err = targetConversation(n.Account, n.Conversation, n.Team, n.Topic)
		if err != nil {
			return nil, fmt.Errorf("notify[%d]: %w", i, err)
		}
		out = append(out, nt)
	}
	return out, nil
}
