// Package mcp connects openbot to MCP servers (DESIGN.md §6) with
// github.com/mark3labs/mcp-go: stdio servers (a command openbot starts) and
// streamable HTTP servers (a URL). Each server's tools become agents.Tool values
// named "<server>__<tool>" and are published through Options.OnTools, so the
// agents Registry can select and approve them like built-ins.
//
// Manager.Run supervises every server: a server that fails to start is reported
// with its stderr tail and its tools stay absent while the others run; a stdio
// server that exits (or an HTTP server that stops answering) is restarted with
// exponential backoff; an HTTP session the server no longer knows (404) is
// re-initialized at once; tool lists are refreshed on
// notifications/tools/list_changed; on shutdown every server is stopped within
// Options.ShutdownGrace.
//
// With Options.Registry set, the servers are declared to the agents Registry as
// tool sources when the Manager is made, so runs wait for a server that is
// starting and are told, in words, why a server that failed is not available.
// Tools that need a capability openbot does not offer (task-augmented
// execution) are not offered to the model.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"openbot/agents"
)

// Defaults applied by NewManager to zero Options fields.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultStartTimeout   = 30 * time.Second
	DefaultShutdownGrace  = 5 * time.Second
	DefaultRestartMin     = 1 * time.Second
	DefaultRestartMax     = 1 * time.Minute
	DefaultHealthInterval = 30 * time.Second
	// DefaultResultCap is the agent's own cap on a tool result, so a cut result
	// reaches the model with this package's note of its real size intact.
	DefaultResultCap = agents.DefaultMaxToolResultChars // bytes of a tool result's text
	stderrTailSize   = 4 << 10                          // bytes of a stdio server's stderr kept for reports
)

// ServerConfig is one MCP server (config `mcp_servers[]`). Exactly one of
// Command (stdio) and URL (streamable HTTP) is set.
type ServerConfig struct {
	// Name prefixes the server's tools ("<name>__<tool>"); it must be unique.
	Name string
	// Command, Args and Env start a stdio server. Its environment is PATH, HOME,
	// USER, LANG and TMPDIR of openbot's own environment plus Env (openbot's
	// secrets are not passed on) unless Options.InheritEnv is set. With
	// WorkspacePlaceholder in Args or Env the server is scoped: one process per
	// thread workspace (scoped.go).
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach a streamable HTTP server.
	URL     string
	Headers map[string]string
	// Idempotent says every tool of the server may be called again when a
	// restart interrupted a call after it started (agents.RepeatSafer,
	// DESIGN.md §8); false (the default) tells the model instead that the call
	// was interrupted and may not have completed.
	Idempotent bool
}

// Options configures a Manager. Zero durations take the Default* values.
type Options struct {
	Servers []ServerConfig
	// OnTools is called whenever a server's tool list changes: after it started,
	// after tools/list_changed, and with nil when it stopped or crashed. Calls
	// for one server are sequential; calls for different servers may overlap.
	// It must not block for long.
	OnTools func(server string, tools []agents.Tool)
	// Registry, when set, receives every server as a tool source: declared
	// (Registry.Expect) by NewManager, its tools set (SetSource) as OnTools
	// says, and a failure reported in words (Registry.SourceFailed).
	Registry *agents.Registry
	// OnState is called after every change of a server's state (starting,
	// running, failed, stopped) with its new status; Reason is set for failed.
	// Calls for one server are sequential. It must not block for long.
	OnState func(ServerStatus)
	// CallTimeout bounds one tool call; a call that takes longer returns an error
	// result to the model.
	CallTimeout time.Duration
	// StartTimeout bounds starting a server: spawn or connect, initialize, list tools.
	StartTimeout time.Duration
	// ShutdownGrace bounds stopping one server: stdin is closed, SIGTERM follows
	// after half of it, SIGKILL to the process group at its end.
	ShutdownGrace time.Duration
	// RestartMin and RestartMax bound the exponential backoff between restarts.
	RestartMin time.Duration
	RestartMax time.Duration
	// HealthInterval is how often an HTTP server's tools are listed, to notice
	// that it is gone or that its tools changed without a notification.
	HealthInterval time.Duration
	// ResultCap bounds a tool result's text in bytes, the note saying it was
	// cut and the real size included. Default DefaultResultCap.
	ResultCap int
	// Dir is the working directory of stdio servers ("" = openbot's).
	Dir string
	// InheritEnv passes openbot's whole environment to stdio servers.
	InheritEnv bool
	// Workspace returns the absolute workspace directory of a call, which a
	// scoped server's process for that call is given; it is required when a
	// server is scoped (ServerConfig.Scoped). It may create the directory.
	Workspace func(agents.ToolCall) (string, error)
	// MaxScoped bounds the processes of one scoped server (default
	// DefaultMaxScoped); ScopedIdle is how long one may go without a call
	// before it is stopped (default DefaultScopedIdle).
	MaxScoped  int
	ScopedIdle time.Duration
	// Logger receives start failures (with the stderr tail), crashes and
	// restarts; nil discards.
	Logger *slog.Logger
}

// ServerStatus is a snapshot of one server for `doctor` and admin pages.
type ServerStatus struct {
	Name      string
	Transport string // "stdio" or "http"
	State     string // "starting", "running", "failed", "stopped"
	Tools     int
	Restarts  int
	// LastError is the last start failure or crash, with the stderr tail.
	LastError string
	// Reason is why the server failed, in words for people in a chat thread
	// or a terminal: no stderr, URLs or secrets ("its command was not found").
	Reason string
}

// Manager owns the MCP server connections. Create it with NewManager and call
// Run once; Tools and Status are safe to call concurrently at any time.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	status map[string]*ServerStatus
	tools  map[string][]agents.Tool
	// live is each server's current session; liveChanged is closed and
	// replaced whenever live changes (Tool.Call waits on it to retry a call
	// on the session that replaced an expired one).
	live        map[string]*session
	liveChanged chan struct{}

	// scoped holds the per-workspace processes of scoped servers, whose
	// configs (with the placeholder) are in scopedCfg by name.
	scoped    *scopedPool
	scopedCfg map[string]ServerConfig
}

// NewManager returns a Manager for opts. It does no I/O.
func NewManager(opts Options) *Manager {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.CallTimeout, DefaultCallTimeout)
	def(&opts.StartTimeout, DefaultStartTimeout)
	def(&opts.ShutdownGrace, DefaultShutdownGrace)
	def(&opts.RestartMin, DefaultRestartMin)
	def(&opts.RestartMax, DefaultRestartMax)
	def(&opts.HealthInterval, DefaultHealthInterval)
	def(&opts.ScopedIdle, DefaultScopedIdle)
	if opts.MaxScoped <= 0 {
		opts.MaxScoped = DefaultMaxScoped
	}
	if opts.RestartMax < opts.RestartMin {
		opts.RestartMax = opts.RestartMin
	}
	if opts.ResultCap <= 0 {
		opts.ResultCap = DefaultResultCap
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		opts:   opts,
		log:    opts.Logger,
		status: map[string]*ServerStatus{},
		tools:  map[string][]agents.Tool{},
		live:   map[string]*session{},

		liveChanged: make(chan struct{}),
		scopedCfg:   map[string]ServerConfig{},
	}
	m.scoped = newScopedPool(m)
	for _, s := range opts.Servers {
		if s.Scoped() {
			m.scopedCfg[s.Name] = s
		}
		if opts.Registry != nil {
			opts.Registry.Expect(s.Name)
		}
		tr := "stdio"
		if s.Command == "" {
			tr = "http"
		}
		m.status[s.Name] = &ServerStatus{Name: s.Name, Transport: tr, State: "starting"}
	}
	return m
}

// Run starts every server and supervises it until ctx is done, then stops them
// all, each within Options.ShutdownGrace, and returns nil. A server that cannot
// start or keeps crashing never makes Run fail: it is logged and retried with
// backoff. Run returns an error only for an invalid server list (empty or
// duplicate name, neither or both of command and url, a scoped server without
// Options.Workspace), or when it cannot make the empty directory a scoped
// server lists its tools in, before starting any.
func (m *Manager) Run(ctx context.Context) error {
	seen := map[string]bool{}
	for i, s := range m.opts.Servers {
		switch {
		case s.Name == "":
			return fmt.Errorf("mcp: servers[%d]: name is empty", i)
		case seen[s.Name]:
			return fmt.Errorf("mcp: servers[%d]: duplicate name %q", i, s.Name)
		case (s.Command == "") == (s.URL == ""):
			return fmt.Errorf("mcp: server %q: set exactly one of command and url", s.Name)
		case s.Scoped() && m.opts.Workspace == nil:
			return fmt.Errorf("mcp: server %q is scoped to the thread's workspace, but no workspace resolver is set", s.Name)
		}
		seen[s.Name] = true
	}
	var wg sync.WaitGroup
	servers := slices.Clone(m.opts.Servers)
	if len(m.scopedCfg) > 0 {
		// A scoped server lists its tools in an empty directory of its own.
		probe, err := os.MkdirTemp("", "openbot-mcp-probe-")
		if err != nil {
			return fmt.Errorf("mcp: directory for scoped servers to list their tools in: %w", err)
		}
		defer os.RemoveAll(probe)
		wg.Add(1)
		go func() { // owned by Run: joined below; stops every scoped process within ShutdownGrace of ctx done
			defer wg.Done()
			m.scoped.run(ctx)
		}()
		for i, s := range servers {
			if s.Scoped() {
				servers[i] = s.withWorkspace(probe)
			}
		}
	}
	for _, s := range servers {
		wg.Add(1)
		go func() { // owned by Run: joined below; each returns within ShutdownGrace of ctx done
			defer wg.Done()
			m.supervise(ctx, s)
		}()
	}
	wg.Wait()
	return nil
}

// Tools returns the tools of every running server, sorted by name.
func (m *Manager) Tools() []agents.Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []agents.Tool
	for _, ts := range m.tools {
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b agents.Tool) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return out
}

// Status returns a snapshot of every configured server, in config order.
func (m *Manager) Status() []ServerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ServerStatus, 0, len(m.opts.Servers))
	for _, s := range m.opts.Servers {
		if st, ok := m.status[s.Name]; ok {
			out = append(out, *st)
		}
	}
	return out
}

func (m *Manager) setState(name, state string, err error) {
	m.mu.Lock()
	st := m.status[name]
	if st == nil {
		m.mu.Unlock()
		return
	}
	st.State = state
	if err != nil {
		st.LastError = err.Error()
		st.Reason = reason(err, m.opts.StartTimeout)
	}
	if state == "running" && st.LastError != "" {
		st.Restarts++
	}
	snap := *st
	m.mu.Unlock()
	// OnState first: a run waiting for this server goes on only after the
	// person was told.
	if m.opts.OnState != nil {
		m.opts.OnState(snap)
	}
	if reg := m.opts.Registry; reg != nil {
		switch state {
		case "starting":
			reg.Expect(name)
		case "failed":
			reg.SourceFailed(name, errors.New(snap.Reason))
		}
	}
}

// setLive records s as server name's current session (nil: none) and wakes
// the calls waiting for a new one.
func (m *Manager) setLive(name string, s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s == nil {
		delete(m.live, name)
	} else {
		m.live[name] = s
	}
	close(m.liveChanged)
	m.liveChanged = make(chan struct{})
}

// liveSession returns server name's current session, or nil.
func (m *Manager) liveSession(name string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[name]
}

// nextSession waits until server name has a live session other than old and
// returns it, or returns nil when ctx ends first.
func (m *Manager) nextSession(ctx context.Context, name string, old *session) *session {
	for {
		m.mu.Lock()
		s, ch := m.live[name], m.liveChanged
		m.mu.Unlock()
		if s != nil && s != old {
			return s
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// publish records a server's tools and calls OnTools. It is called only from
// the server's supervisor goroutine, so calls for one server are sequential.
func (m *Manager) publish(name string, tools []agents.Tool) {
	m.mu.Lock()
	if tools == nil {
		delete(m.tools, name)
	} else {
		m.tools[name] = tools
	}
	if st := m.status[name]; st != nil {
		st.Tools = len(tools)
	}
	m.mu.Unlock()
	if reg := m.opts.Registry; reg != nil {
		if err := reg.SetSource(name, tools); err != nil {
			m.log.Error("mcp tools not registered", "mcp_server", name, "err", err)
			reg.SourceFailed(name, fmt.Errorf("its tools could not be registered: %v", err))
		}
	}
	if m.opts.OnTools != nil {
		m.opts.OnTools(name, tools)
	}
}
