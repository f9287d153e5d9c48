package main

import (
	"fmt"
	"log/slog"
	"openbot/adapters/console"
	"strings"
	"sync"
	"time"

	"openbot/agents"
	"openbot/agents/mcp"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
)

// shutdownBound is the most a clean shutdown may take (DESIGN.md §8): stop intake,
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
		MaxTokensPerRun:     l.MaxTokensPerRun,
	}
}

// coreCost maps the cost section onto core.Cost: amounts in currency units
// become micro-units (prices per million tokens, budgets).
func coreCost(cfg *config.Config) *core.Cost {
	c := cfg.Cost
	out := &core.Cost{Currency: c.Currency, WarnAt: c.WarnAt, Owner: c.Owner,
		Prices: cfg.PriceTable(), Bots: map[string]core.BotBudget{},
		Thread: coreLimit(c.Budgets.Thread), GlobalDaily: coreLimit(c.Budgets.GlobalDaily)}
	for h, b := range c.Budgets.Bots {
		out.Bots[h] = core.BotBudget{Daily: coreLimit(b.Daily), Monthly: coreLimit(b.Monthly)}
	}
	return out
}

// alwaysReply lists the accounts whose reply_to_unaddressed is "always"
// (core.Options.AlwaysReply, quiet threads).
func alwaysReply(cfg *config.Config) []core.AccountID {
	var out []core.AccountID
	for _, s := range cfg.Slack {
		if s.ReplyToUnaddressed == config.ReplyAlways {
			out = append(out, core.AccountID("slack/"+s.Name))
		}
	}
	for _, t := range cfg.Telegram {
		if t.ReplyToUnaddressed == config.ReplyAlways {
			out = append(out, core.AccountID("telegram/"+t.Name))
		}
	}
	for _, f := range cfg.Feishu {
		if f.ReplyToUnaddressed == config.ReplyAlways {
			out = append(out, core.AccountID("feishu/"+f.Name))
		}
	}
	return out
}

func coreLimit(b config.Budget) core.Limit {
	return core.Limit{Tokens: b.Tokens, CostMicros: config.Micros(b.Cost)}
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
			LLM:           b.LLM.First(),
			Fallbacks:     b.LLM[min(1, len(b.LLM)):],
			Model:         b.Model,
			Tools:         b.Tools,
			ApprovalTools: config.ApprovalToolNames(b.ApprovalTools),
			ToolApprovers: toolApprovers(b.ApprovalTools),
			Memory:        b.Memory,
			MaxModelCalls: b.MaxModelCalls,
			Approvers:     actorIDs(b.Approvers),
			SelfApprove:   b.SelfApprove,

			MaxParallelThreads: b.MaxParallelThreads,
			MaxTokensPerRun:    b.MaxTokensPerRun,
			MaxTokens:          b.MaxTokens,
			Temperature:        b.Temperature,
			ReasoningEffort:    b.ReasoningEffort,
			Vision:             cfg.VisionFor(b),
			Fetch:              core.FetchPolicy{AllowDomains: b.Fetch.AllowDomains, Unlisted: b.Fetch.Unlisted},
		})
	}
	return out
}

// toolApprovers maps the approval_tools entries that name their own approvers.
func toolApprovers(entries []config.ApprovalTool) []core.ToolApprovers {
	var out []core.ToolApprovers
	for _, e := range entries {
		if len(e.Approvers) > 0 {
			out = append(out, core.ToolApprovers{Tool: e.Tool, Approvers: actorIDs(e.Approvers)})
		}
	}
	return out
}

// actorIDs converts configured approver ids.
// owners are the configuration's owners (config.Config.OwnerIDs) and, in chat
// mode, the person at openbot's own terminal.
func owners(cfg *config.Config, chat bool) []core.ActorID {
	out := actorIDs(cfg.OwnerIDs())
	if chat {
		out = append(out, console.Human)
	}
	return out
}

func actorIDs(ids []string) []core.ActorID {
	out := make([]core.ActorID, 0, len(ids))
	for _, id := range ids {
		out = append(out, core.ActorID(id))
	}
	return out
}

// newRegistry builds the process's tool registry: the built-in tools, rooted at
// the configured workspace, with hide masked inside the shell sandbox
// (toolOptions).
func newRegistry(cfg *config.Config, log *slog.Logger, hide ...string) (*agents.Registry, error) {
	reg := agents.NewRegistry()
	builtins, err := tools.Builtins(toolOptions(cfg, log, hide))
	if err != nil {
		return nil, fmt.Errorf("built-in tools: %w", err)
	}
	for _, t := range builtins {
		if err := reg.Add(t); err != nil {
			return nil, fmt.Errorf("built-in tools: %w", err)
		}
	}
	return reg, nil
}

// checkTools reports every name in a bot's tools and approval_tools that names no
// built-in or history tool and no configured MCP server (DESIGN.md §6: unknown
// names are a config error naming the field). "<server>", "<server>__*" and
// "<server>__<tool>" are accepted for a configured server; whether that server
// really offers the tool is only known once it runs.
func checkTools(cfg *config.Config, reg *agents.Registry) config.Errors {
	known := map[string]bool{}
	for _, n := range reg.Names() {
		known[n] = true
	}
	for _, t := range agents.BuiltinTools() {
		known[t.Name()] = true
	}
	servers := map[string]bool{}
	for _, s := range cfg.MCPServers {
		servers[s.Name] = true
	}
	var errs config.Errors
	check := func(path string, names []string) {
		for j, n := range names {
			server, _, isSource := strings.Cut(n, agents.SourceSeparator)
			if known[n] || servers[n] || (isSource && servers[server]) {
				continue
			}
			errs = append(errs, config.FieldError{
				Path: fmt.Sprintf("%s[%d]", path, j),
				Msg:  fmt.Sprintf("unknown tool %q (not a built-in, and no mcp_servers entry named %q)", n, server),
			})
		}
	}
	for i, b := range cfg.Bots {
		check(fmt.Sprintf("bots[%d].tools", i), b.Tools)
		check(fmt.Sprintf("bots[%d].approval_tools", i), config.ApprovalToolNames(b.ApprovalTools))
	}
	return errs
}

// newAgent builds the agent loop with every LLM profile as a provider. Secrets go
// into the providers only, never into logs: the logged base_url is redacted of
// user:password and secret query parameters (DESIGN.md §9).
// mem, when not nil, is the bots' memory (seed §9, cmd/openbot/memory.go).
func newAgent(cfg *config.Config, reg *agents.Registry, log *slog.Logger, mem *agents.Memories) (*agents.Agent, error) {
	for name, p := range cfg.LLM {
		log.Info("llm profile", "name", name, "base_url", core.Redact(p.BaseURL), "model", p.Model, "api_keys", len(p.Keys()))
	}
	opts := agents.Options{
		Cooldowns:    cooldowns,
		Providers:    providers(cfg),
		Registry:     reg,
		Limits:       coreLimits(cfg.Limits),
		Logger:       log,
		ReadyTimeout: cfg.MCPReadyTimeout,
		// Vision reads people's images from the folder inbound files go to.
		FilesDir:      fileLimits(cfg).Dir,
		MaxImageBytes: cfg.Files.MaxImageBytes,
		MaxImageSide:  cfg.Files.MaxImageSide,
	}
	if mem != nil {
		opts.Memory = mem
		opts.MessageIndex = mem.MessageIndex() // nil without embeddings: lexical recall
	}
	return agents.New(opts)
}

// cooldowns is the process's memory of failed llm profiles and keys: every
// agent (a reload builds a new one) shares it.
var cooldowns = agents.NewCooldowns(nil)

// providers maps the llm profiles onto agents providers.
func providers(cfg *config.Config) map[string]agents.Provider {
	out := make(map[string]agents.Provider, len(cfg.LLM))
	for name, p := range cfg.LLM {
		ap := agents.Provider{API: p.Provider, BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers,
			RequestTimeout: p.RequestTimeout, IdleTimeout: p.StreamIdleTimeout,
			ContextWindow: p.ContextWindow, HistoryShare: p.HistoryShare, CompactWith: p.CompactWith}
		if len(p.APIKeys) > 0 {
			for _, k := range p.Keys() {
				ap.Keys = append(ap.Keys, agents.APIKey{Label: k.Label, Value: k.Value})
			}
		}
		out[name] = ap
	}
	return out
}

// mcpStateReporter turns MCP server states into lines for a person: one when a
// server fails (not again for each retry) and one when it runs again.
func mcpStateReporter(say func(string)) func(mcp.ServerStatus) {
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(st mcp.ServerStatus) {
		mu.Lock()
		was := failed[st.Name]
		switch st.State {
		case "failed":
			failed[st.Name] = true
		case "running":
			delete(failed, st.Name)
		}
		mu.Unlock()
		switch {
		case st.State == "failed" && !was:
			say(fmt.Sprintf("MCP server %s is not available: %s. Its tools are missing until it starts; openbot keeps trying (details in openbot.log).", st.Name, st.Reason))
		case st.State == "running" && was:
			say(fmt.Sprintf("MCP server %s is running again.", st.Name))
		}
	}
}
