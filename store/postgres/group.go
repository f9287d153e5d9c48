package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"time"

	"openbot/core"
)

// Group commit for Batch (DESIGN.md §7): callers queue; the first caller that
// finds no group in flight leads one, running every queued call (at most
// maxGroup) in one transaction and one commit, each inside its own savepoint so
// a failing call is rolled back alone and never reruns its neighbours. When the
// group is done and calls have queued meanwhile, the leader hands the lead to the
// oldest of them and returns; there is no timer and no goroutine of its own.

// maxGroup bounds how many Batch calls share one commit.
const maxGroup = 1000

// maxLeaders bounds the groups of one store in flight at once.
var maxLeaders = envInt("OPENBOT_PG_GROUPS", 1)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// groupTimeout bounds one group's transaction; it does not end with any single
// caller's context, since the others' writes share it.
const groupTimeout = time.Minute

type call struct {
	ctx      context.Context
	fn       func(core.Tx) error
	done     chan struct{}
	lead     chan struct{} // receives one token when this call must lead
	err      error
	panicked any
	taken    bool // in a group (guarded by committer.mu)
	promoted bool // handed the lead (guarded by committer.mu)
}

type committer struct {
	s       *Store
	mu      sync.Mutex
	queue   []*call
	leaders int // groups in flight, at most maxLeaders
	closed  bool
}

func newCommitter(s *Store) *committer { return &committer{s: s} }

// submit queues fn and returns its result: fn's error, the commit's error,
// ctx.Err() when ctx ends before fn's group starts, or ErrClosed. A panic in fn
// is re-raised on the caller's goroutine.
func (c *committer) submit(ctx context.Context, fn func(core.Tx) error) error {
	me := &call{ctx: ctx, fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("store postgres %s: %w", c.s.where, ErrClosed)
	}
	c.queue = append(c.queue, me)
	lead := c.leaders < maxLeaders
	if lead {
		c.leaders++
		me.promoted = true
	}
	c.mu.Unlock()
	if !lead {
		select {
		case <-me.done:
			return me.result()
		case <-me.lead:
		case <-ctx.Done():
			if c.withdraw(me) {
				return ctx.Err()
			}
			select { // taken or promoted meanwhile
			case <-me.done:
				return me.result()
			case <-me.lead:
			}
		}
	}
	c.runGroup()
	<-me.done
	return me.result()
}

func (me *call) result() error {
	if me.panicked != nil {
		panic(me.panicked)
	}
	return me.err
}

// withdraw removes me from the queue unless it was taken into a group or
// promoted; it reports whether it did.
func (c *committer) withdraw(me *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if me.taken || me.promoted {
		return false
	}
	for i, q := range c.queue {
		if q == me {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return true
		}
	}
	return false
}

// runGroup runs the queued calls as one group, then hands the lead on.
func (c *committer) runGroup() {
	c.mu.Lock()
	n := min(len(c.queue), maxGroup)
	if n == 0 { // closed meanwhile: every queued call was answered
		c.leaders--
		c.mu.Unlock()
		return
	}
	group := append([]*call(nil), c.queue[:n]...)
	c.queue = c.queue[n:]
	for _, g := range group {
		g.taken = true
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(group[0].ctx), groupTimeout)
	err := c.s.write(ctx, func(w *writeTx) error {
		for _, g := range group { // a run again starts clean
			g.err, g.panicked = nil, nil
		}
		if len(group) == 1 { // alone: no savepoint needed, a failure rolls back the transaction
			g := group[0]
			if g.err = g.ctx.Err(); g.err != nil {
				return errCallFailed
			}
			g.err, g.panicked = guarded(g.fn, w)
			if retryable(g.err) != "" {
				return g.err // the group runs again
			}
			if g.err != nil || g.panicked != nil {
				return errCallFailed
			}
			return nil
		}
		for _, g := range group {
			if err := runOne(ctx, w, g); err != nil {
				return err
			}
		}
		return nil
	})
	cancel()
	for _, g := range group {
		if err != nil && g.err == nil && g.panicked == nil {
			g.err = err
		}
		close(g.done)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		for _, next := range c.queue {
			if !next.promoted { // another group's end may have promoted the first already
				next.promoted = true
				next.lead <- struct{}{}
				return
			}
		}
	}
	c.leaders--
}

// runOne runs g's fn inside a savepoint; a failing or panicking fn is rolled
// back to it. The error returned is the database's, or g's when another run
// may cure it (retryable); it fails the whole group, which write runs again.
func runOne(ctx context.Context, w *writeTx, g *call) error {
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return nil
	}
	if _, err := w.tx.Exec(ctx, `SAVEPOINT batch_call`); err != nil {
		return err
	}
	// The group's context, not the caller's: a caller giving up mid-call must
	// not abort the connection its neighbours' writes share.
	locked := maps.Clone(w.locked)
	g.err, g.panicked = guarded(g.fn, &writeTx{readTx: readTx{ctx: ctx, tx: w.tx}, locked: w.locked, marked: w.marked})
	if retryable(g.err) != "" {
		return g.err // lost a race or the connection: the whole group runs again
	}
	if g.err != nil || g.panicked != nil {
		clear(w.locked)
		maps.Copy(w.locked, locked) // the savepoint gave back the thread locks the call took
		_, err := w.tx.Exec(ctx, `ROLLBACK TO SAVEPOINT batch_call`)
		return err
	}
	_, err := w.tx.Exec(ctx, `RELEASE SAVEPOINT batch_call`)
	return err
}

// errCallFailed rolls back a group of one whose call failed; the caller gets
// the call's own error, never this.
var errCallFailed = errors.New("batch call failed")

func guarded(fn func(core.Tx) error, tx core.Tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(tx), nil
}

// close answers queued calls with ErrClosed; a group in flight finishes.
func (c *committer) close() {
	c.mu.Lock()
	queued := c.queue
	c.queue = nil
	c.closed = true
	for _, q := range queued {
		q.taken = true
		q.err = fmt.Errorf("store postgres %s: %w", c.s.where, ErrClosed)
		close(q.done)
	}
	c.mu.Unlock()
}
