package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"
)

// reloadSet is what the two sets a reload changes piece by piece share (the
// platform accounts, accountSet, and the MCP servers, mcpSet): members by name,
// each running in a goroutine the set's Run owns, and Apply, which hands Run a
// new configuration and waits for the changes in words. Only Run's goroutine
// touches the members once it has started; before, the constructor does.
type reloadSet[C, V any] struct {
	noun    string // "account", "mcp server": how changes are worded
	what    string // "accounts", "mcp servers": how errors are worded
	log     *slog.Logger
	members map[string]*member[V]
	wg      sync.WaitGroup // the members' goroutines
	reqs    chan reloadReq[C]
	quit    chan struct{} // closed when Run returns
	once    sync.Once
}

// member is one running element of a reloadSet.
type member[V any] struct {
	name string
	cfg  any // its config entry; when it changes the member restarts
	val  V   // what runs (the adapter, the MCP manager)
	stop context.CancelFunc
	done chan struct{} // closed when its run returned; nil when never started
}

type reloadReq[C any] struct {
	cfg  C
	done chan []string
}

func newReloadSet[C, V any](noun, what string, log *slog.Logger) *reloadSet[C, V] {
	return &reloadSet[C, V]{noun: noun, what: what, log: log, members: map[string]*member[V]{},
		reqs: make(chan reloadReq[C]), quit: make(chan struct{})}
}

// serve applies the configurations Apply hands it, on Run's goroutine, until ctx
// is done. Run calls it, and finish when it returns.
func (s *reloadSet[C, V]) serve(ctx context.Context, apply func(context.Context, C) []string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-s.reqs:
			req.done <- apply(ctx, req.cfg)
		}
	}
}

// finish waits for every member's goroutine, then makes Apply fail.
func (s *reloadSet[C, V]) finish() {
	s.wg.Wait()
	s.once.Do(func() { close(s.quit) })
}

// errSetStopped is returned by Apply once Run has returned.
var errSetStopped = errors.New("shutting down")

// Apply makes the running members match cfg: removed ones stop, changed ones
// restart, new ones start. It blocks until that is done or ctx ends, and returns
// the changes made in words.
func (s *reloadSet[C, V]) Apply(ctx context.Context, cfg C) ([]string, error) {
	req := reloadReq[C]{cfg: cfg, done: make(chan []string, 1)}
	select {
	case s.reqs <- req:
	case <-s.quit:
		return nil, fmt.Errorf("%s are %w", s.what, errSetStopped)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case ch := <-req.done:
		return ch, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", s.what, ctx.Err())
	}
}

// start runs run for m in a goroutine Run joins; m.stop stops it.
func (s *reloadSet[C, V]) start(ctx context.Context, m *member[V], run func(context.Context)) {
	mctx, cancel := context.WithCancel(ctx)
	m.stop, m.done = cancel, make(chan struct{})
	s.wg.Add(1)
	go func() { // owned by Run: joined before it returns
		defer s.wg.Done()
		defer close(m.done)
		run(mctx)
	}()
}

// prune stops and drops every member whose entry in want is gone or differs,
// waiting for each to stop (at most bound; 0 waits as long as it takes) before
// forget(name) removes what it registered. It returns the changes so far.
func (s *reloadSet[C, V]) prune(want map[string]any, bound time.Duration, forget func(name string)) *changes {
	c := &changes{noun: s.noun, restarted: map[string]bool{}}
	for name, m := range s.members {
		e, keep := want[name]
		if keep && reflect.DeepEqual(e, m.cfg) {
			continue
		}
		if m.stop != nil {
			m.stop()
			if bound == 0 {
				<-m.done
			} else {
				select {
				case <-m.done:
				case <-time.After(bound):
					s.log.Warn(s.noun+" did not stop in time", s.noun, name)
				}
			}
		}
		forget(name)
		delete(s.members, name)
		if keep {
			c.restarted[name] = true
			c.list = append(c.list, s.noun+" "+name+" changed: restarted")
		} else {
			c.list = append(c.list, s.noun+" "+name+" removed")
		}
	}
	return c
}

// changes words what a reload did to one set.
type changes struct {
	noun      string
	restarted map[string]bool
	list      []string
}

// started records a member started: "added" unless it restarted.
func (c *changes) started(name string) {
	if !c.restarted[name] {
		c.list = append(c.list, c.noun+" "+name+" added")
	}
}
