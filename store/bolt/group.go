package bolt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
)

// Group commit (DESIGN.md §7, "one writer"): Store.Batch queues its function and
// one committer goroutine runs every queued function in one bbolt read-write
// transaction, so one fsync serves them all. There is no timer: the committer
// starts a commit as soon as it finds anything queued, so a lone write costs one
// commit, and the calls that arrive while that commit is in flight form the next
// group. Under load groups grow to the arrival rate times the commit time, which
// is where bbolt's own Batch gets its throughput, without its MaxBatchDelay wait.

// DefaultMaxBatchSize bounds one group when Options.MaxBatchSize is 0.
const DefaultMaxBatchSize = 1000

// batchQueueFactor sizes the queue of calls waiting for a group: this many groups
// of Options.MaxBatchSize. Callers beyond it block in Batch (honouring ctx).
const batchQueueFactor = 4

// errSolo tells a caller that its function failed inside a group and must run alone.
var errSolo = errors.New("bolt: batch function failed in a group; run it alone")

// call is one queued Batch function and where its result goes (buffered, size 1).
type call struct {
	ctx context.Context
	fn  func(*bbolt.Tx) error
	res chan error
}

// committer owns the group-commit goroutine; Store.Close stops it.
type committer struct {
	db    *bbolt.DB
	max   int
	queue chan *call
	stop  chan struct{} // closed by Close: no new calls, then the loop exits
	done  chan struct{} // closed when the loop has exited
	// closedErr answers calls that were queued but never started when Close came.
	closedErr error
	// onGroup, when set (tests only, before the first Batch), is called with each
	// group's size just before its transaction starts.
	onGroup func(n int)
	// observe is Store.OnCommit's function (nil: none); stats are the totals
	// Store.CommitStats reads.
	observe atomic.Pointer[func(writes int, d time.Duration)]
	stats   struct{ commits, writes, busy atomic.Int64 }
}

func newCommitter(db *bbolt.DB, max int, closedErr error) *committer {
	if max <= 0 {
		max = DefaultMaxBatchSize
	}
	c := &committer{db: db, max: max, queue: make(chan *call, max*batchQueueFactor),
		stop: make(chan struct{}), done: make(chan struct{}), closedErr: closedErr}
	go c.loop()
	return c
}

// submit queues fn and waits for its group to commit. It returns ctx.Err() when
// ctx ends while waiting for room in the queue or before fn's group starts (fn is
// then not run), ErrClosed when the store closes before fn's group starts, and
// otherwise fn's error or the commit's. A function that fails inside a group is
// run again alone, on the caller's goroutine, so its error (or panic) reaches its
// caller only; the rest of its group is committed without it.
func (c *committer) submit(ctx context.Context, fn func(*bbolt.Tx) error) error {
	cl := &call{ctx: ctx, fn: fn, res: make(chan error, 1)}
	select {
	case c.queue <- cl:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return c.closedErr
	}
	var err error
	select {
	case err = <-cl.res:
	case <-c.done:
		// The loop has exited; it answered every call it took before closing done.
		select {
		case err = <-cl.res:
		default:
			return c.closedErr
		}
	}
	if err == errSolo {
		err = c.alone(fn)
	}
	return err
}

// alone runs fn in a transaction of its own (a Batch call run alone, or an
// Update) and counts it as a commit of one write, timed from the moment the
// writer is its.
func (c *committer) alone(fn func(*bbolt.Tx) error) error {
	var start time.Time
	err := c.db.Update(func(tx *bbolt.Tx) error { start = time.Now(); return fn(tx) })
	if err == nil {
		c.committed(1, time.Since(start))
	}
	return err
}

// loop takes the first queued call, adds every call already waiting (up to max)
// without waiting for more, and commits them; until stop.
func (c *committer) loop() {
	defer close(c.done)
	group := make([]*call, 0, c.max)
	for {
		select { // Close wins over queued calls, so none starts after it
		case <-c.stop:
			c.drain()
			return
		default:
		}
		select {
		case <-c.stop:
			c.drain()
			return
		case cl := <-c.queue:
			group = append(group[:0], cl)
		}
	gather:
		for len(group) < c.max {
			select {
			case cl := <-c.queue:
				group = append(group, cl)
			default:
				break gather
			}
		}
		c.commit(group)
		clear(group) // drop references to finished calls while idle
	}
}

// drain answers every call still queued at Close with closedErr.
func (c *committer) drain() {
	for {
		select {
		case cl := <-c.queue:
			cl.res <- c.closedErr
		default:
			return
		}
	}
}

// commit runs group in one transaction. A call whose ctx is done is answered with
// ctx.Err() and left out. When a function fails (or panics), the transaction rolls
// back, that call is told to run alone (errSolo) and the rest are tried again, in
// their order; a commit error goes to every call of the group.
func (c *committer) commit(group []*call) {
	group = slices.DeleteFunc(group, func(cl *call) bool {
		if err := cl.ctx.Err(); err != nil {
			cl.res <- err
			return true
		}
		return false
	})
	for len(group) > 0 {
		if c.onGroup != nil {
			c.onGroup(len(group))
		}
		failed := -1
		start := time.Now()
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for i, cl := range group {
				if err := safeCall(cl.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			group[failed].res <- errSolo
			group = slices.Delete(group, failed, failed+1)
			continue
		}
		if err == nil {
			c.committed(len(group), time.Since(start))
		}
		for _, cl := range group {
			cl.res <- err
		}
		return
	}
}

// committed counts a group of writes that committed in d and tells observe.
func (c *committer) committed(writes int, d time.Duration) {
	c.stats.commits.Add(1)
	c.stats.writes.Add(int64(writes))
	c.stats.busy.Add(int64(d))
	if f := c.observe.Load(); f != nil {
		(*f)(writes, d)
	}
}

// safeCall runs fn, turning a panic into an error so one caller's bug does not
// stop the committer or fail the others (the caller's solo run panics again on
// its own goroutine).
func safeCall(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bolt: batch function panicked: %v", p)
		}
	}()
	return fn(tx)
}

// close stops taking calls, lets the group in flight finish, answers the calls
// still queued with an error and waits for the loop to exit.
func (c *committer) close() {
	close(c.stop)
	<-c.done
}
