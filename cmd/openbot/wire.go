package main

import (
	"fmt"
	"log/slog"
	"time"

	"openbot/agents"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
)

// shutdownBound is the most a clean shutdown may take (issue 2 item 1): stop intake,
// let the engine finish or checkpoint runs, flush delivery, close the store.
const shutdownBound = 15 * time.Second

// engineGrace is core.Options.ShutdownGrace: in-flight runs get this long, then
// delivery lanes the same again, which keeps the engine inside shutdownBound.
const engineGrace = 5 * time.Second

// coreLimits maps config limits onto core.Limits.
func coreLimits(l config.Limits) core.Limits {
	return core.Limits{
		MaxConcurrentRuns:   l.MaxConcurrentRuns,
		MaxBotHops:          l.MaxBotHops,
		MaxModelCallsPerRun: l.MaxModelCallsPerRun,
		HistoryTokenBudget:  l.HistoryTokenBudget,
		HistoryMaxMessages:  l.HistoryMaxMessages,
		RunTimeout:          l.RunTimeout,
	}
}

// botProfiles maps configured bots onto core.BotProfile, in configuration order.
func botProfiles(cfg *config.Config) []core.BotProfile {
	out := make([]core.BotProfile, 0, len(cfg.Bots))
	for _, b := range cfg.Bots {
		out = append(out, core.BotProfile{
			Handle:        b.Handle,
			Name:          b.Name,
			Description:   b.Description,
			Instructions:  b.Instructions,
			LLM:           b.LLM,
			Model:         b.Model,
			Tools:         b.Tools,
			ApprovalTools: b.ApprovalTools,
			Memory:        b.Memory,
			MaxModelCalls: b.MaxModelCalls,
		})
	}
	return out
}

// newAgent builds the agent loop: every LLM profile as a provider and the built-in
// tools in one registry. Secrets go into the providers only, never into logs.
func newAgent(cfg *config.Config, log *slog.Logger) (*agents.Agent, error) {
	providers := make(map[string]agents.Provider, len(cfg.LLM))
	for name, p := range cfg.LLM {
		providers[name] = agents.Provider{BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers}
		log.Info("llm profile", "name", name, "base_url", p.BaseURL, "model", p.Model, "api_key_set", p.APIKey != "")
	}
	reg := agents.NewRegistry()
	builtins, err := tools.Builtins(tools.Options{WorkspaceRoot: cfg.Workspace, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("built-in tools: %w", err)
	}
	for _, t := range builtins {
		if err := reg.Add(t); err != nil {
			return nil, fmt.Errorf("built-in tools: %w", err)
		}
	}
	return agents.New(agents.Options{
		Providers: providers,
		Registry:  reg,
		Limits:    coreLimits(cfg.Limits),
		Logger:    log,
	})
}
