package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

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
// once, so the first runs wait for them too.
type mcpSet struct {
	reg *agents.Registry
	log *slog.Logger
	// say, when set, is told in words when a server becomes unavailable and when
	// it is back (chat prints it in the terminal, where the log is not shown).
	say func(string)
	// metrics, when set (before Run), gets every server state change.
	metrics *metrics.Metrics

	apply chan mcpApply // served by Run
	quit  chan struct{} // closed when Run returns
	once  sync.Once     // closes quit
	// servers is owned by the constructor until Run starts, then by Run's goroutine.
	servers map[string]*mcpServer
}

// mcpServer is one running server.
type mcpServer struct {
	cfg  config.MCPServer
	m    *mcp.Manager
	stop context.CancelFunc
	done chan struct{} // closed when its Manager.Run returned
}

type mcpApply struct {
	servers []config.MCPServer
	done    chan []string // the changes made
}

func newMCPSet(cfg *config.Config, reg *agents.Registry, log *slog.Logger, say func(string)) *mcpSet {
	s := &mcpSet{reg: reg, log: log, say: say, apply: make(chan mcpApply), quit: make(chan struct{}),
		servers: map[string]*mcpServer{}}
	for _, sc := range cfg.MCPServers {
		s.servers[sc.Name] = &mcpServer{cfg: sc, m: s.manager(sc)}
	}
	return s
}

// manager builds the Manager of one server; NewManager declares it to reg.
func (s *mcpSet) manager(sc config.MCPServer) *mcp.Manager {
	opts := mcp.Options{
		Servers:  []mcp.ServerConfig{{Name: sc.Name, Command: sc.Command, Args: sc.Args, Env: sc.Env, URL: sc.URL, Headers: sc.Headers, Idempotent: sc.Idempotent}},
		Logger:   s.log,
		Registry: s.reg,
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
	defer s.once.Do(func() { close(s.quit) })
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(sv *mcpServer) {
		sctx, cancel := context.WithCancel(ctx)
		sv.stop, sv.done = cancel, make(chan struct{})
		wg.Add(1)
		go func() { // owned by Run: joined before it returns
			defer wg.Done()
			defer close(sv.done)
			if err := sv.m.Run(sctx); err != nil && sctx.Err() == nil {
				s.log.Error("mcp server", "server", sv.cfg.Name, "err", err)
			}
		}()
	}
	for _, sv := range s.servers {
		start(sv)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-s.apply:
			req.done <- s.applyServers(req.servers, start)
		}
	}
}

// applyServers stops the servers that were removed or changed (waiting for each
// to stop) and starts the new and changed ones. It returns what changed.
func (s *mcpSet) applyServers(next []config.MCPServer, start func(*mcpServer)) []string {
	want := map[string]config.MCPServer{}
	for _, sc := range next {
		want[sc.Name] = sc
	}
	var changes []string
	restarted := map[string]bool{}
	for name, sv := range s.servers {
		sc, keep := want[name]
		if keep && reflect.DeepEqual(sc, sv.cfg) {
			continue
		}
		sv.stop()
		<-sv.done // bounded by the Manager's shutdown grace
		s.reg.Forget(name)
		delete(s.servers, name)
		if keep {
			restarted[name] = true
			changes = append(changes, "mcp server "+name+" changed: restarted")
		} else {
			changes = append(changes, "mcp server "+name+" removed")
		}
	}
	for _, sc := range next {
		if _, ok := s.servers[sc.Name]; ok {
			continue
		}
		sv := &mcpServer{cfg: sc, m: s.manager(sc)}
		s.servers[sc.Name] = sv
		start(sv)
		if !restarted[sc.Name] {
			changes = append(changes, "mcp server "+sc.Name+" added")
		}
	}
	return changes
}

// errMCPStopped is returned by Apply once Run has returned.
var errMCPStopped = errors.New("mcp servers are shutting down")

// Apply makes the running servers match servers: removed ones stop and their
// tools go, changed ones restart, new ones start. It blocks until that is done
// (stopping a server takes up to its shutdown grace) or ctx ends, and returns
// the changes made in words.
func (s *mcpSet) Apply(ctx context.Context, servers []config.MCPServer) ([]string, error) {
	req := mcpApply{servers: servers, done: make(chan []string, 1)}
	select {
	case s.apply <- req:
	case <-s.quit:
		return nil, errMCPStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case ch := <-req.done:
		return ch, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("mcp servers: %w", ctx.Err())
	}
}
