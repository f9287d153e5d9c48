package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Delivery lane limits (DESIGN.md §4 "delivery lanes", picobot's per-target lanes).
const (
	laneQueue        = 64               // entries waiting per lane; the rest wait in the store
	laneIdle         = 30 * time.Second // an idle lane is released after this long
	deliverTimeout   = 30 * time.Second // one Deliver call
	maxDeliverTries  = 8                // then the entry is marked failed
	dispatchInterval = time.Second      // sweep for entries that did not fit a lane
	dispatchPage     = 256
	// shrinkFrom is the fewest entries a lane map must have held before release
	// rebuilds it once it holds a quarter of that or less (shrink).
	shrinkFrom = 64
)

// laneWorkers is how many lanes of one account deliver at once; the others
// wait their turn, holding only their queue of IDs. A platform takes a bot's
// messages at tens a second at most (Telegram about 30), which 16 calls in
// flight keep up with, while a burst over thousands of conversations no longer
// costs a goroutine, a connection and their buffers per conversation (memory
// flat under bursts, DESIGN.md §9).
const laneWorkers = 16

type laneKey struct {
	account AccountID
	conv    ConversationRef
}

// lane is one ordered delivery queue (DESIGN.md §4): state per (account,
// conversation), made when the first entry arrives. Its queue holds only outbox
// IDs (the entry is read from the store when its turn comes) and grows as needed
// up to laneQueue; a goroutine delivers it only while the queue is not empty,
// and at most laneWorkers lanes of an account have one (the rest wait, in
// order, for one of those to finish its lane). An idle lane holds no buffer and
// no goroutine, and after laneIdle it is released.
type lane struct {
	queue     []OutboxID // oldest first; nil while idle
	running   bool       // a goroutine is delivering the queue
	waiting   bool       // in lanes.ready, for a goroutine of its account
	idleSince time.Time  // engine clock, set when the queue drained
	// until is when this process's lease on the lane lapses, as last stored
	// (shared only, core/lanelease.go); zero when it holds none.
	until time.Time
}

// lanes delivers the outbox: one ordered lane per (account, conversation), each
// with a bounded queue and at most one goroutine, and at most laneWorkers such
// goroutines per account, owned by the dispatcher's context.
type lanes struct {
	e        *Engine
	kicked   chan struct{} // wakes the dispatcher; cap 1
	drained  chan struct{} // told when inflight empties (waitIdle); cap 1
	mu       sync.Mutex
	m        map[laneKey]*lane
	inflight map[OutboxID]bool
	wg       sync.WaitGroup
	idle     time.Duration         // release a lane idle this long; laneIdle
	released time.Time             // when idle lanes were last looked for (engine clock)
	drop     []laneKey             // shared: released lanes whose leases are still to drop
	theirs   map[laneKey]time.Time // shared: lanes other processes hold, until when
	// mPeak and inflightPeak are the most entries m and inflight held since
	// they were made: a Go map keeps its buckets after deletes, so release
	// rebuilds a map that shrank to a quarter of that (shrink).
	mPeak, inflightPeak int
	busy                map[AccountID]int     // lane goroutines per account, at most laneWorkers
	ready               map[AccountID][]*lane // lanes waiting for one of them, oldest first
}

func newLanes(e *Engine) *lanes {
	return &lanes{e: e, kicked: make(chan struct{}, 1), drained: make(chan struct{}, 1), m: map[laneKey]*lane{}, inflight: map[OutboxID]bool{}, idle: laneIdle,
		busy: map[AccountID]int{}, ready: map[AccountID][]*lane{}}
}

// kick wakes the dispatcher after new outbox entries were committed, and,
// shared, the other processes' dispatchers (the entry's lane may be theirs).
func (l *lanes) kick() {
	l.kickLocal()
	l.e.cluster.hint("outbox", "")
}

// kickLocal wakes this process's dispatcher.
func (l *lanes) kickLocal() {
	select {
	case l.kicked <- struct{}{}:
	default:
	}
}

// dispatch hands pending entries to their lanes until ctx is done.
func (l *lanes) dispatch(ctx context.Context) {
	t := time.NewTicker(dispatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kicked:
		case <-t.C:
		}
		l.release(l.e.clock.Now())
		l.dropReleased(ctx)
		if err := l.sweep(ctx); err != nil && ctx.Err() == nil {
			l.e.log.Error("outbox sweep", "err", err)
		}
	}
}

// release forgets the lanes idle for l.idle or longer; it looks at most once per
// dispatchInterval of the engine clock, so a burst of kicks does not rescan.
func (l *lanes) release(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.released) < dispatchInterval {
		return
	}
	l.released = now
	l.mPeak = max(l.mPeak, len(l.m)) // only release deletes lanes: this is the most since the last look
	for k, ln := range l.m {
		if !ln.running && len(ln.queue) == 0 && now.Sub(ln.idleSince) >= l.idle {
			delete(l.m, k)
			if ln.leased() {
				l.drop = append(l.drop, k)
			}
		}
	}
	l.m = shrink(l.m, &l.mPeak)
	l.inflight = shrink(l.inflight, &l.inflightPeak)
}

// shrink returns m, or, when m held at least shrinkFrom entries (*peak) and now
// holds a quarter of that or less, a copy of m sized for what it holds, and then
// sets *peak to that. Go maps never give back the buckets a burst grew them to,
// so without this the lanes of 5,000 conversations would stay allocated after
// they were released (memory flat under bursts, DESIGN.md §9).
func shrink[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if *peak < shrinkFrom || len(m) > *peak/4 {
		return m
	}
	n := make(map[K]V, len(m))
	for k, v := range m {
		n[k] = v
	}
	*peak = len(n)
	return n
}

func (l *lanes) sweep(ctx context.Context) error {
	var after OutboxID
	full := map[laneKey]bool{}
	for {
		var page []OutboxEntry
		err := l.e.store.View(ctx, func(tx ReadTx) error {
			var err error
			page, err = tx.PendingOutbox(after, dispatchPage)
			return err
		})
		if err != nil {
			return err
		}
		mine := l.leaseLanes(ctx, page)
		for _, o := range page {
			after = o.ID
			k := laneKey{o.Account, o.Conversation}
			if full[k] || !mine(k) {
				continue
			}
			if _, ok := l.e.adapter(o.Account); !ok {
				l.settle(ctx, o, "", fmt.Errorf("no adapter is running for account %q", o.Account), true)
				continue
			}
			if !l.offer(ctx, k, o.ID) {
				full[k] = true
			}
		}
		if len(page) < dispatchPage {
			return nil
		}
	}
}

// offer queues entry id on its lane, making the lane and starting its goroutine
// when needed (or, with laneWorkers of its account busy, queueing the lane for
// the first of them that is done), unless the entry is already in flight; false
// if the lane is full.
func (l *lanes) offer(ctx context.Context, k laneKey, id OutboxID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[id] {
		return true
	}
	ln, ok := l.m[k]
	if !ok {
		ln = &lane{}
		l.m[k] = ln
	}
	if l.e.cluster.shared && !ln.leased() {
		return true // not this process's lane (lease lost or not taken): the sweep sees to it
	}
	if len(ln.queue) >= laneQueue {
		return false
	}
	ln.queue = append(ln.queue, id)
	l.inflight[id] = true
	l.inflightPeak = max(l.inflightPeak, len(l.inflight))
	if ln.running || ln.waiting {
		return true
	}
	if l.busy[k.account] >= laneWorkers {
		ln.waiting = true
		l.ready[k.account] = append(l.ready[k.account], ln)
		return true
	}
	ln.running = true
	l.busy[k.account]++
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.run(ctx, k.account, ln)
	}()
	return true
}

// run delivers ln's queue in order; when it is empty (dropping the buffer) it
// goes on with the account's oldest waiting lane, and returns when none waits.
// While lanes wait, it delivers one entry of a lane and puts the lane back at
// the end of the wait (the lane's order is kept: one goroutine at a time has it).
// When ctx is done it empties every lane it takes (the entries stay pending in
// the store).
func (l *lanes) run(ctx context.Context, account AccountID, ln *lane) {
	for {
		l.mu.Lock()
		if len(ln.queue) == 0 || ctx.Err() != nil {
			for _, id := range ln.queue {
				l.done(id)
			}
			ln.queue, ln.running, ln.idleSince = nil, false, l.e.clock.Now()
			ln = l.next(account)
			l.mu.Unlock()
			if ln == nil {
				return
			}
			continue
		}
		id := ln.queue[0]
		ln.queue = ln.queue[1:]
		l.mu.Unlock()
		l.deliver(ctx, ln, id)
		l.mu.Lock()
		l.done(id)
		if len(ln.queue) > 0 && len(l.ready[account]) > 0 {
			// Lanes wait: take turns, one entry each, so a busy conversation
			// does not hold one of the account's goroutines while others wait.
			ln.running, ln.waiting = false, true
			l.ready[account] = append(l.ready[account], ln)
			ln = l.next(account)
		}
		l.mu.Unlock()
	}
}

// next hands a goroutine of account that finished its lane the account's
// oldest waiting lane, or, when none waits, counts the goroutine out and
// returns nil. l.mu is held.
func (l *lanes) next(account AccountID) *lane {
	if q := l.ready[account]; len(q) > 0 {
		ln := q[0]
		q[0] = nil
		if q = q[1:]; len(q) == 0 {
			delete(l.ready, account) // the emptied array goes with it
		} else {
			l.ready[account] = q
		}
		ln.waiting, ln.running = false, true
		return ln
	}
	if l.busy[account]--; l.busy[account] <= 0 {
		delete(l.busy, account)
	}
	return nil
}

// done takes id out of flight (l.mu held) and tells waitIdle when nothing is left.
func (l *lanes) done(id OutboxID) {
	delete(l.inflight, id)
	if len(l.inflight) == 0 {
		select {
		case l.drained <- struct{}{}:
		default:
		}
	}
}

// waitIdle waits up to d until nothing is in flight and nothing is pending. It
// looks again each time the entries in flight drain (the dispatcher it kicks
// puts pending ones in flight), and at least every dispatchInterval.
func (l *lanes) waitIdle(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		n := len(l.inflight)
		l.mu.Unlock()
		if n == 0 {
			var pending []OutboxEntry
			_ = l.e.store.View(context.Background(), func(tx ReadTx) error {
				var err error
				pending, err = tx.PendingOutbox(0, dispatchPage)
				return err
			})
			if !l.anyMine(pending) {
				return true
			}
			l.kick()
		}
		select {
		case <-l.drained:
		case <-time.After(dispatchInterval):
		case <-deadline.C:
			return false
		}
	}
}

// wait blocks until every lane goroutine has returned (after ctx is done).
func (l *lanes) wait() { l.wg.Wait() }
