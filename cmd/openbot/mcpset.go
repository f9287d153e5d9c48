package main

import (
	"context"
	"log/slog"

	"openbot/agents"
	"openbot/agents/mcp"
	"openbot/config"
	"openbot/metrics"
)

// mcpSet runs the configured MCP servers, one mcp.Manager each, so a reload can
// add, change or remove a server without touching the others (DESIGN.md §6).
// Each server is a tool source of reg named "<server>": bots select its tools as
// "<server>", "<server>__*" or "<server>__<tool>", and runs wait for a server
// that is starting. Servers configured at construction are declared to reg at
// once, so the first runs wait for them too. Apply takes the new server list.
type mcpSet struct {
	*reloadSet[[]config.MCPServer, *mcp.Manager]
	reg *agents.Registry
	// say, when set, is told in words when a server becomes unavailable and when
	// it is back (chat prints it in the terminal, where the log is not shown).
	say func(string)
	// metrics, when set (before Run), gets every server state change.
	metrics *metrics.Metrics
	// workspace resolves a call's thread workspace, for servers scoped to it
	// ({workspace} in their args or env).
	workspace func(agents.ToolCall) (string, error)
}

func newMCPSet(cfg *config.Config, reg *agents.Registry, log *slog.Logger, say func(string)) *mcpSet {
	s := &mcpSet{reloadSet: newReloadSet[[]config.MCPServer, *mcp.Manager]("mcp server", "mcp servers", log), reg: reg, say: say,
		workspace: toolOptions(cfg, log, nil).WorkspaceDir}
	for _, sc := range cfg.MCPServers {
		s.members[sc.Name] = &member[*mcp.Manager]{name: sc.Name, cfg: sc, val: s.manager(sc)}
	}
	return s
}

// manager builds the Manager of one server; NewManager declares it to reg.
func (s *mcpSet) manager(sc config.MCPServer) *mcp.Manager {
	opts := mcp.Options{
		Servers:   []mcp.ServerConfig{{Name: sc.Name, Command: sc.Command, Args: sc.Args, Env: sc.Env, URL: sc.URL, Headers: sc.Headers, Idempotent: sc.Idempotent}},
		Logger:    s.log,
		Registry:  s.reg,
		Workspace: s.workspace,
		OnTools: func(server string, tools []agents.Tool) {
			s.log.Info("mcp tools", "server", server, "count", len(tools))
		},
	}
	if s.say != nil {
		opts.OnState = mcpStateReporter(s.say)
	}
	opts.OnState = s.observeState(opts.OnState)
	return mcp.NewManager(opts)
}

// Run starts every server and supervises them until ctx is done, applying the
// server lists Apply hands it; then it stops them all (each within the MCP
// shutdown grace) and returns nil.
func (s *mcpSet) Run(ctx context.Context) error {
	defer s.finish()
	for _, sv := range s.members {
		s.start(ctx, sv)
	}
	return s.serve(ctx, s.applyServers)
}

func (s *mcpSet) start(ctx context.Context, sv *member[*mcp.Manager]) {
	s.reloadSet.start(ctx, sv, func(ctx context.Context) {
		if err := sv.val.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("mcp server", "server", sv.name, "err", err)
		}
	})
}

// applyServers stops the servers that were removed or changed (waiting for each
// to stop, which the Manager's shutdown grace bounds) and starts the new and
// changed ones. It returns what changed.
func (s *mcpSet) applyServers(ctx context.Context, next []config.MCPServer) []string {
	want := map[string]any{}
	for _, sc := range next {
		want[sc.Name] = sc
	}
	c := s.prune(want, 0, s.reg.Forget)
	for _, sc := range next {
		if _, ok := s.members[sc.Name]; ok {
			continue
		}
		sv := &member[*mcp.Manager]{name: sc.Name, cfg: sc, val: s.manager(sc)}
		s.members[sc.Name] = sv
		s.start(ctx, sv)
		c.started(sc.Name)
	}
	return c.list
}
