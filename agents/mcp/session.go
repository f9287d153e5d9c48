package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"openbot/agents"
)

// session is one live connection to a server: a started process (stdio) or an
// initialized HTTP client. A new session is made for every (re)start.
type session struct {
	server string
	// where names the server for approval prompts: its command's base name
	// (stdio) or its URL's host (HTTP), never arguments, paths or credentials.
	where string
	// idempotent is ServerConfig.Idempotent: its tools are repeat-safe.
	idempotent bool
	client     *client.Client
	proc       *process // nil for HTTP
	// refresh is signalled (never blocking) on tools/list_changed.
	refresh chan struct{}
	// cancel ends the session's own context (Listen stream, transport).
	cancel context.CancelFunc
	wg     sync.WaitGroup // session goroutines (subscriptions/listen)
	// closed is set once the session is over, before its tools are withdrawn
	// (OnTools with nil); calls on its tools then return ErrServerDown.
	closed atomic.Bool
	tools  []agents.Tool
	// expired is closed (once, by expire) when the server answered 404 for
	// the session: the supervisor then re-initializes at once.
	expired    chan struct{}
	expireOnce sync.Once
}

// errSessionExpired ends serve when the server no longer knows the session.
var errSessionExpired = errors.New("the server no longer knows the session (404)")

// expire tells the supervisor that the server forgot this session.
func (s *session) expire() {
	s.expireOnce.Do(func() { close(s.expired) })
}

func (s *session) onNotification(n mcp.JSONRPCNotification) {
	if n.Method == mcp.MethodNotificationToolsListChanged {
		select {
		case s.refresh <- struct{}{}:
		default: // a refresh is already pending
		}
	}
}

// lost is closed when the server is gone on its own (a stdio process exited).
func (s *session) lost() <-chan struct{} {
	if s.proc == nil {
		return nil
	}
	return s.proc.exited
}

// stop ends the session within grace: the client is closed (for stdio this
// closes the server's stdin), then the process gets SIGTERM and SIGKILL.
func (s *session) stop(grace time.Duration) {
	s.closed.Store(true)
	s.cancel()
	closed := make(chan struct{})
	go func() { // bounded: mcp-go caps the HTTP session DELETE at 5s; waited for at most grace
		defer close(closed)
		_ = s.client.Close()
	}()
	if s.proc != nil {
		s.proc.stop(grace)
	}
	select {
	case <-closed:
	case <-time.After(grace):
	}
	waitGroupTimeout(&s.wg, grace)
}

// describe adds what is known about why a session ended: exit status and the
// tail of the server's stderr.
func (s *session) describe(err error) error {
	if s.proc == nil {
		return err
	}
	return s.proc.describe(err)
}

func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// connect starts cfg's server, initializes it and lists its tools, all within
// StartTimeout. On failure everything it started is stopped again.
func (m *Manager) connect(ctx context.Context, cfg ServerConfig) (*session, error) {
	sctx, cancel := context.WithCancel(ctx)
	s := &session{server: cfg.Name, where: where(cfg), idempotent: cfg.Idempotent, refresh: make(chan struct{}, 1), cancel: cancel, expired: make(chan struct{})}
	var tr transport.Interface
	if cfg.Command != "" {
		p, err := startProcess(cfg, m.opts)
		if err != nil {
			cancel()
			return nil, err
		}
		s.proc = p
		tr = transport.NewIO(p.stdout, p.stdin, nil)
	} else {
		h, err := transport.NewStreamableHTTP(cfg.URL,
			transport.WithHTTPHeaders(cfg.Headers),
			transport.WithHTTPLogger(m.log.With("mcp_server", cfg.Name)))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("mcp server %q: %w", cfg.Name, err)
		}
		tr = h
	}
	s.client = client.NewClient(tr)
	s.client.OnNotification(s.onNotification)
	fail := func(err error) (*session, error) {
		s.stop(m.opts.ShutdownGrace)
		return nil, s.describe(err)
	}
	if err := s.client.Start(sctx); err != nil {
		return fail(fmt.Errorf("start transport: %w", err))
	}
	ictx, icancel := context.WithTimeout(sctx, m.opts.StartTimeout)
	defer icancel()
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "openbot", Version: "1"}
	init, err := s.client.Initialize(ictx, req)
	if err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	if init.Capabilities.Tools == nil {
		m.log.Warn("mcp server offers no tools", "mcp_server", cfg.Name)
	}
	tools, err := m.listTools(ictx, s)
	if err != nil {
		return fail(err)
	}
	s.tools = tools
	// On protocol 2026-07-28 notifications need an explicit subscription; on
	// earlier versions they arrive on the transport's own stream.
	if mcp.IsModernProtocol(s.client.ProtocolVersion()) && init.Capabilities.Tools != nil && init.Capabilities.Tools.ListChanged {
		s.wg.Add(1)
		go func() { // owned by the session: ends when stop cancels sctx
			defer s.wg.Done()
			_ = s.client.Listen(sctx, mcp.SubscriptionFilter{ToolsListChanged: true})
		}()
	}
	return s, nil
}

// serve blocks while the session is healthy: it refreshes the tool list on
// list_changed and lists an HTTP server's tools every HealthInterval. It returns nil when ctx is done, else
// why the session was lost.
func (m *Manager) serve(ctx context.Context, s *session) error {
	var health <-chan time.Time
	if s.proc == nil {
		t := time.NewTicker(m.opts.HealthInterval)
		defer t.Stop()
		health = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.lost():
			return errors.New("server exited")
		case <-s.expired:
			return errSessionExpired
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
			tools, err := m.listTools(lctx, s)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, transport.ErrSessionTerminated) {
					return errSessionExpired
				}
				m.log.Warn("mcp tools refresh failed; keeping the previous list", "mcp_server", s.server, "err", err)
				continue
			}
			s.tools = tools
			m.publish(s.server, tools)
			m.log.Info("mcp tools refreshed", "mcp_server", s.server, "tools", len(tools))
		case <-health:
			// Ping is a no-op on protocol 2026-07-28, so listing the tools is
			// the liveness check; it also catches changes a legacy HTTP server
			// had no stream to announce.
			hctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
			tools, err := m.listTools(hctx, s)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, transport.ErrSessionTerminated) {
				return errSessionExpired
			}
			if err != nil {
				return fmt.Errorf("health check: %w", err)
			}
			if fingerprint(tools) != fingerprint(s.tools) {
				s.tools = tools
				m.publish(s.server, tools)
				m.log.Info("mcp tools refreshed", "mcp_server", s.server, "tools", len(tools))
			}
		}
	}
}

// fingerprint identifies a tool list by names, descriptions and schemas.
func fingerprint(ts []agents.Tool) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Name())
		b.WriteByte(0)
		b.WriteString(t.Description())
		b.WriteByte(0)
		b.Write(t.Schema())
		b.WriteByte(0)
	}
	return b.String()
}

// supervise runs one server until ctx is done: connect, publish its tools,
// serve, and after a failure or crash wait with exponential backoff and start
// it again. It returns within ShutdownGrace (plus a little) of ctx done.
func (m *Manager) supervise(ctx context.Context, cfg ServerConfig) {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(m.opts.RestartMin),
		backoff.WithMaxInterval(m.opts.RestartMax),
		backoff.WithMaxElapsedTime(0))
	log := m.log.With("mcp_server", cfg.Name)
	for {
		m.setState(cfg.Name, "starting", nil)
		s, err := m.connect(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				m.setState(cfg.Name, "stopped", nil)
				return
			}
			m.setState(cfg.Name, "failed", err)
			log.Error("mcp server failed to start; its tools are unavailable", "err", err)
		} else {
			m.setState(cfg.Name, "running", nil)
			log.Info("mcp server running", "tools", len(s.tools), "protocol", s.client.ProtocolVersion())
			m.setLive(cfg.Name, s)
			m.publish(cfg.Name, s.tools)
			started := time.Now()
			err := m.serve(ctx, s)
			// Mark the session closed before its tools are withdrawn, so that
			// anyone who has seen the withdrawal (OnTools with nil) and still
			// holds an old tool value gets ErrServerDown from it, never a
			// transport error from the dead connection.
			s.closed.Store(true)
			m.setLive(cfg.Name, nil)
			m.publish(cfg.Name, nil)
			s.stop(m.opts.ShutdownGrace)
			if ctx.Err() != nil {
				m.setState(cfg.Name, "stopped", nil)
				log.Info("mcp server stopped")
				return
			}
			if errors.Is(err, errSessionExpired) {
				// Nothing is wrong with the server: it restarted or dropped the
				// session. Re-initialize now; a call that met the 404 is waiting.
				log.Info("mcp session expired; re-initializing")
				continue
			}
			err = s.describe(err)
			m.setState(cfg.Name, "failed", err)
			log.Error("mcp server stopped unexpectedly; restarting", "err", err)
			if time.Since(started) > m.opts.RestartMax {
				b.Reset() // it ran fine for a while: start over from RestartMin
			}
		}
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			m.setState(cfg.Name, "stopped", nil)
			return
		case <-t.C:
		}
	}
}

// listTools lists the server's tools and wraps them as agents.Tool values.
func (m *Manager) listTools(ctx context.Context, s *session) ([]agents.Tool, error) {
	res, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	out := make([]agents.Tool, 0, len(res.Tools))
	seen := map[string]bool{}
	for _, t := range res.Tools {
		if t.Execution != nil && t.Execution.TaskSupport == mcp.TaskSupportRequired {
			// openbot does not call tools as tasks; such a call would fail.
			m.log.Warn("mcp tool needs task-augmented execution, which openbot does not offer; not offered to the model", "mcp_server", s.server, "tool", t.Name)
			continue
		}
		tl := newTool(m, s, t)
		if seen[tl.name] {
			m.log.Warn("mcp tool name collides after sanitizing; skipped", "mcp_server", s.server, "tool", t.Name)
			continue
		}
		seen[tl.name] = true
		out = append(out, tl)
	}
	return out, nil
}

// tailString renders b for a log line.
func tailString(b []byte) string {
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
}
