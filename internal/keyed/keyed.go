// Package keyed runs functions concurrently across keys and in submission order
// within a key, a bounded number at a time. The Slack Socket Mode and Feishu
// long-connection readers use it (DESIGN.md §4: order within a conversation is
// kept; events of different conversations are stored concurrently, so their
// Engine.Ingest calls share commits).
package keyed

import (
	"context"
	"sync"
)

// Group runs the functions given to Go. Its owner calls Wait before it returns,
// so every goroutine it started has ended (bounded shutdown: the functions
// honour the owner's ctx).
type Group struct {
	sem  chan struct{}
	mu   sync.Mutex
	tail map[string]chan struct{} // closed when the key's last submitted function returned
	wg   sync.WaitGroup
}

// New returns a Group running at most limit functions at once (limit >= 1;
// smaller is taken as 1). Functions waiting for an earlier one of their key
// count against the limit.
func New(limit int) *Group {
	return &Group{sem: make(chan struct{}, max(limit, 1)), tail: map[string]chan struct{}{}}
}

// Go runs fn after every function submitted earlier with the same key returned.
// It blocks while limit functions are pending, and returns false, without
// running fn, when ctx ends while waiting for room.
func (g *Group) Go(ctx context.Context, key string, fn func()) bool {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	done := make(chan struct{})
	g.mu.Lock()
	prev := g.tail[key]
	g.tail[key] = done
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() { <-g.sem }()
		defer func() {
			g.mu.Lock()
			if g.tail[key] == done {
				delete(g.tail, key)
			}
			g.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev // holds no slot the earlier function needs: it has its own
		}
		fn()
	}()
	return true
}

// Wait waits for every function submitted so far to return.
func (g *Group) Wait() { g.wg.Wait() }
