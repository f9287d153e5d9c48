package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"openbot/agents"
	"openbot/agents/mcp"
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
			ApprovalTools: config.ApprovalToolNames(b.ApprovalTools),
			ToolApprovers: toolApprovers(b.ApprovalTools),
			Memory:        b.Memory,
			MaxModelCalls: b.MaxModelCalls,
			Approvers:     actorIDs(b.Approvers),
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
// built-in or history tool and no configured MCP server (issue 6 item 1: unknown
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
func newAgent(cfg *config.Config, reg *agents.Registry, log *slog.Logger) (*agents.Agent, error) {
	providers := make(map[string]agents.Provider, len(cfg.LLM))
	for name, p := range cfg.LLM {
		providers[name] = agents.Provider{BaseURL: p.BaseURL, APIKey: p.APIKey, Model: p.Model, Headers: p.Headers,
			RequestTimeout: p.RequestTimeout, IdleTimeout: p.StreamIdleTimeout}
		log.Info("llm profile", "name", name, "base_url", core.Redact(p.BaseURL), "model", p.Model, "api_key_set", p.APIKey != "")
	}
	return agents.New(agents.Options{
		Providers: providers,
		Registry:  reg,
		Limits:    coreLimits(cfg.Limits),
		Logger:    log,
	})
}

// newMCP builds the MCP manager for the configured servers (nil when there are
// none). Each server's tools are published into reg as the source "<server>", so
// bots select them by server name or "<server>__<tool>" (issue 6 item 3).
func newMCP(cfg *config.Config, reg *agents.Registry, log *slog.Logger) *mcp.Manager {
	if len(cfg.MCPServers) == 0 {
		return nil
	}
	servers := make([]mcp.ServerConfig, 0, len(cfg.MCPServers))
	for _, s := range cfg.MCPServers {
		servers = append(servers, mcp.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers})
	}
	return mcp.NewManager(mcp.Options{
		Servers: servers,
		Logger:  log,
		OnTools: func(server string, tools []agents.Tool) {
			if err := reg.SetSource(server, tools); err != nil {
				log.Error("mcp tools not registered", "server", server, "err", err)
				return
			}
			log.Info("mcp tools", "server", server, "count", len(tools))
		},
	})
}
