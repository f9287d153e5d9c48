package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// WorkspacePlaceholder, in an argument or an environment value of a stdio
// server, scopes the server to the workspace of the thread a call comes from:
// each workspace gets its own process of the server, started on its first
// call with every placeholder replaced by the workspace's absolute path, so a
// thread's calls see that thread's files only (the built-in file tools are
// jailed the same way). The server's tool list comes from one process started
// on an empty directory, which no call reaches.
const WorkspacePlaceholder = "{workspace}"

// Defaults of the scoped servers' processes.
const (
	// DefaultMaxScoped bounds the processes one scoped server has at once.
	DefaultMaxScoped = 8
	// DefaultScopedIdle is how long a scoped process may go without a call
	// before it is stopped.
	DefaultScopedIdle = 10 * time.Minute
)

// ErrScopedBusy is returned (wrapped, with agents.ErrNotRun) by a tool of a
// scoped server when every one of its Options.MaxScoped processes is in the
// middle of a call for another workspace: the call did not run.
var ErrScopedBusy = errors.New("every process of the server is busy with other threads")

// Scoped reports whether cfg is a stdio server scoped to the thread's
// workspace: WorkspacePlaceholder appears in one of its Args or Env values.
func (cfg ServerConfig) Scoped() bool {
	if cfg.Command == "" {
		return false
	}
	for _, a := range cfg.Args {
		if strings.Contains(a, WorkspacePlaceholder) {
			return true
		}
	}
	for _, v := range cfg.Env {
		if strings.Contains(v, WorkspacePlaceholder) {
			return true
		}
	}
	return false
}

// withWorkspace returns cfg with every WorkspacePlaceholder in its Args and Env
// values replaced by dir (cfg itself is not changed).
func (cfg ServerConfig) withWorkspace(dir string) ServerConfig {
	cfg.Args = slices.Clone(cfg.Args)
	for i, a := range cfg.Args {
		cfg.Args[i] = strings.ReplaceAll(a, WorkspacePlaceholder, dir)
	}
	cfg.Env = maps.Clone(cfg.Env)
	for k, v := range cfg.Env {
		cfg.Env[k] = strings.ReplaceAll(v, WorkspacePlaceholder, dir)
	}
	return cfg
}

// scopedPool holds the per-workspace processes of the Manager's scoped
// servers: at most max per server; one idle for idle is stopped (reap), and
// a new workspace past max takes the place of the least recently used idle
// one. Safe for concurrent use.
type scopedPool struct {
	m    *Manager
	max  int
	idle time.Duration

	mu     sync.Mutex
	closed bool
	procs  map[scopeKey]*scopedProc
}

type scopeKey struct{ server, dir string }

// scopedProc is one workspace's process of a scoped server.
type scopedProc struct {
	ready    chan struct{} // closed once sess or err is set
	sess     *session
	err      error
	users    int       // calls under way
	lastUsed time.Time // when the last call ended
}

func newScopedPool(m *Manager) *scopedPool {
	return &scopedPool{m: m, max: m.opts.MaxScoped, idle: m.opts.ScopedIdle, procs: map[scopeKey]*scopedProc{}}
}

// started reports whether e's start is over (ready closed).
func (e *scopedProc) started() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// dead reports whether e's start failed or its process is gone.
func (e *scopedProc) dead() bool {
	if e.err != nil {
		return true
	}
	if e.sess.closed.Load() {
		return true
	}
	select {
	case <-e.sess.lost():
		return true
	default:
		return false
	}
}

// acquire returns the session of cfg's process for workspace dir, starting it
// when there is none (or it died), and a release to call when the call is
// over. The process outlives ctx: it belongs to the pool.
func (p *scopedPool) acquire(ctx context.Context, cfg ServerConfig, dir string) (*session, func(), error) {
	k := scopeKey{cfg.Name, dir}
	var stale []*session
	defer func() {
		for _, s := range stale {
			s.stop(p.m.opts.ShutdownGrace)
		}
	}()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, fmt.Errorf("%w (shutting down)", ErrServerDown)
	}
	e := p.procs[k]
	if e != nil && e.started() && e.dead() {
		delete(p.procs, k)
		if e.sess != nil {
			stale = append(stale, e.sess)
		}
		e = nil
	}
	fresh := e == nil
	if fresh {
		if p.count(cfg.Name) >= p.max {
			victim, ok := p.lru(cfg.Name)
			if !ok {
				p.mu.Unlock()
				return nil, nil, fmt.Errorf("%w (at most %d at once)", ErrScopedBusy, p.max)
			}
			stale = append(stale, p.procs[victim].sess)
			delete(p.procs, victim)
		}
		e = &scopedProc{ready: make(chan struct{})}
		p.procs[k] = e
	}
	e.users++
	p.mu.Unlock()
	release := func() {
		p.mu.Lock()
		e.users--
		e.lastUsed = time.Now()
		p.mu.Unlock()
	}

	if fresh {
		for _, s := range stale { // make room before the new process starts
			s.stop(p.m.opts.ShutdownGrace)
		}
		stale = nil
		s, err := p.m.connect(context.WithoutCancel(ctx), cfg.withWorkspace(dir))
		p.mu.Lock()
		e.sess, e.err = s, err
		if err != nil && p.procs[k] == e {
			delete(p.procs, k)
		}
		closed := p.closed
		close(e.ready)
		p.mu.Unlock()
		if err == nil && closed {
			s.stop(p.m.opts.ShutdownGrace) // Run ended while it started
		}
		if err == nil {
			p.m.log.Debug("mcp server started for a workspace", "mcp_server", cfg.Name, "workspace", dir)
		}
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		release()
		return nil, nil, e.err
	}
	return e.sess, release, nil
}

// count is how many processes server has (p.mu held).
func (p *scopedPool) count(server string) int {
	n := 0
	for k := range p.procs {
		if k.server == server {
			n++
		}
	}
	return n
}

// lru returns server's started process with no call under way that was used
// least recently (p.mu held).
func (p *scopedPool) lru(server string) (scopeKey, bool) {
	var best scopeKey
	found := false
	for k, e := range p.procs {
		if k.server != server || e.users > 0 || !e.started() {
			continue
		}
		if !found || e.lastUsed.Before(p.procs[best].lastUsed) {
			best, found = k, true
		}
	}
	return best, found
}

// reap stops the processes that have had no call for idle by now.
func (p *scopedPool) reap(now time.Time) {
	var stop []*session
	p.mu.Lock()
	for k, e := range p.procs {
		if e.users == 0 && e.started() && now.Sub(e.lastUsed) >= p.idle {
			if e.sess != nil {
				stop = append(stop, e.sess)
			}
			delete(p.procs, k)
		}
	}
	p.mu.Unlock()
	stopAll(stop, p.m.opts.ShutdownGrace)
}

// run reaps idle processes until ctx is done, then stops them all, each
// within the shutdown grace, and returns.
func (p *scopedPool) run(ctx context.Context) {
	t := time.NewTicker(max(p.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			p.reap(now)
		case <-ctx.Done():
			p.mu.Lock()
			p.closed = true
			var stop []*session
			for k, e := range p.procs {
				if e.started() && e.sess != nil {
					stop = append(stop, e.sess)
				}
				delete(p.procs, k)
			}
			p.mu.Unlock()
			stopAll(stop, p.m.opts.ShutdownGrace)
			return
		}
	}
}

// size is how many processes server has now (for tests and status).
func (p *scopedPool) size(server string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count(server)
}

// stopAll stops every session at once and returns when all have stopped,
// each within grace.
func stopAll(ss []*session, grace time.Duration) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() { // joined below; stop returns within grace
			defer wg.Done()
			s.stop(grace)
		}()
	}
	wg.Wait()
}
