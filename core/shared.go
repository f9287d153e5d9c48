package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"openbot/internal/waitctx"
)

// Shared mode (DESIGN.md §7, core/lease.go): what an engine does beyond the
// single-process runtime when other processes share its store.
//
//   - A run it starts carries its claim (Run.Owner, Run.LeaseUntil); renewLoop
//     extends the claims of the runs executing here every third of the TTL, and
//     cancels a run here whose claim another process took over or whose run was
//     cancelled from another process (the cross-process /stop).
//   - sweepLoop, every SweepInterval, recovers the running runs whose claims
//     lapsed (their process died) exactly as a restart would (recoverRunsTx),
//     wakes the workers of bots with queued work, and kicks delivery.
//   - Hints (Hinter) carry "wake <bot>", "outbox" and "cancel <run>" between
//     processes at once; the sweep finds whatever a lost hint did not.
//   - Outbox lanes are leased per (account, conversation) (core/lanelease.go).
//
// The cluster owns this state: whether the store is shared, this process's id
// and incarnation, the lease TTL, the hints and their queue. Unshared, every
// method is a no-op or says yes (one process owns everything).
type cluster struct {
	e      *Engine
	shared bool
	procID string
	// incarnation owns the lease on procID: the id plus a random part, so a
	// restart with the same id is told apart from a second live process.
	incarnation string
	leaseTTL    time.Duration
	hints       Hinter // nil: only the sweep (unshared: always nil)
	sweepEvery  time.Duration
	hintq       hintQueue
}

// newCluster applies opts' defaults for shared mode; it does no I/O.
func newCluster(e *Engine, opts Options) *cluster {
	c := &cluster{e: e, shared: opts.Shared, procID: opts.ProcessID, leaseTTL: opts.LeaseTTL,
		hints: opts.Hints, sweepEvery: opts.SweepInterval}
	if c.procID == "" {
		c.procID = newProcessID()
	}
	if c.leaseTTL <= 0 {
		c.leaseTTL = DefaultLeaseTTL
	}
	if c.sweepEvery <= 0 {
		c.sweepEvery = 2 * time.Second
	}
	if !c.shared {
		c.hints = nil
	}
	c.hintq.signal = make(chan struct{}, 1)
	c.incarnation = c.procID + "#" + randomHex(4)
	return c
}

// claimRun makes this process the owner of a run it starts (shared only).
func (c *cluster) claimRun(r *Run, now time.Time) {
	if c.shared {
		r.Owner, r.LeaseUntil = c.incarnation, now.Add(c.leaseTTL)
	}
}

// ownsRun reports whether this process may write r as its runner: always
// unshared; shared, only while it is r's owner.
func (c *cluster) ownsRun(r Run) bool { return !c.shared || r.Owner == c.incarnation }

// lapseRun ends this process's claim on a run that shutdown interrupted, so
// another process resumes it at its next sweep instead of after the TTL.
func (c *cluster) lapseRun(ctx context.Context, id RunID) {
	if !c.shared {
		return
	}
	err := c.e.store.Update(ctx, func(tx Tx) error {
		r, err := tx.Run(id)
		if err != nil || r.Owner != c.incarnation || r.Status != RunRunning {
			return err
		}
		r.LeaseUntil = time.Time{}
		_, err = tx.PutRun(r)
		return err
	})
	if err != nil {
		c.e.log.Warn("could not hand an interrupted run over; it is resumed when its claim lapses", "run", id, "err", err)
	}
}

// ErrProcessIDInUse is returned (wrapped) by Run when another live process
// holds this engine's process id (Options.ProcessID must be unique).
var ErrProcessIDInUse = errors.New("process id in use by another live process")

// claimProcessID takes the lease on this process's id for this incarnation
// (shared only). A predecessor with the same id that died holds it until it
// lapses, so it waits up to the lease TTL and a little more; a live process
// with the same id keeps it, and Run fails with ErrProcessIDInUse.
func (c *cluster) claimProcessID(ctx context.Context) error {
	if !c.shared {
		return nil
	}
	key := LeaseKeyProcess(c.procID)
	deadline := c.e.clock.Now().Add(c.leaseTTL + c.leaseTTL/2)
	for {
		_, holder, err := c.takeLease(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("core: claiming process id %q: %w", c.procID, err)
		case holder == "":
			return nil
		case !c.e.clock.Now().Before(deadline):
			return fmt.Errorf("core: process id %q: %w (store.process_id must differ between processes)", c.procID, ErrProcessIDInUse)
		}
		c.e.log.Warn("process id held by another process; waiting for it to lapse", "process", c.procID)
		if waitctx.Sleep(ctx, c.leaseTTL/4) != nil {
			return ctx.Err()
		}
	}
}

// renewProcessID extends the lease on this process's id. When another
// process holds it (this one was cut off past the TTL and a process with the
// same id started meanwhile), this process stops: Run ends with
// ErrProcessIDInUse, before it acts beside the other.
func (c *cluster) renewProcessID(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, c.leaseTTL/3)
	defer cancel()
	_, holder, err := c.takeLease(rctx, LeaseKeyProcess(c.procID))
	switch {
	case holder != "":
		c.e.log.Error("another process runs with this process id; stopping", "process", c.procID, "holder", holder)
		c.e.fail(fmt.Errorf("core: process id %q: %w (taken while this process was cut off from the store)", c.procID, ErrProcessIDInUse))
	case err != nil && ctx.Err() == nil:
		c.e.log.Warn("renewing the process id lease failed", "process", c.procID, "err", err)
	}
}

// dropProcessID releases this process's id at shutdown (shared only).
func (c *cluster) dropProcessID(ctx context.Context) {
	if !c.shared {
		return
	}
	c.dropLease(ctx, LeaseKeyProcess(c.procID))
}

// busyAcrossTx widens busy (the threads where this process runs bot; nil for
// none) to every thread where bot has a running run in any process, and
// returns how many more runs bot may start under its max_parallel_threads.
// Unshared, busy already says it all and the room is not bounded here: the
// callers (pick, mayPick) bound it by their own count.
func (c *cluster) busyAcrossTx(tx ReadTx, bot BotProfile, busy func(ThreadID) bool) (func(ThreadID) bool, int, error) {
	local := func(t ThreadID) bool { return busy != nil && busy(t) }
	if !c.shared {
		return local, math.MaxInt, nil
	}
	rs, err := tx.RunsByStatus(RunRunning)
	if err != nil {
		return nil, 0, err
	}
	running := map[ThreadID]bool{}
	for _, r := range rs {
		if r.Bot == bot.ID() {
			running[r.Thread] = true
		}
	}
	return func(t ThreadID) bool { return running[t] || local(t) }, bot.parallel() - len(running), nil
}

// loops runs renewLoop, sweepLoop and the hint loops until ctx is done;
// they are owned by Run.
func (c *cluster) loops(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	if !c.shared {
		return
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.renewLoop(runCtx) // runs may outlive intake by the grace: keep their claims
	}()
	go func() {
		defer wg.Done()
		c.sweepLoop(ctx)
	}()
	if c.hints != nil {
		wg.Add(2)
		go func() {
			defer wg.Done()
			c.hintSender(runCtx)
		}()
		go func() {
			defer wg.Done()
			_ = c.hints.ListenHints(runCtx, c.onHint)
		}()
	}
}

// renewLoop extends the claims of this process's runs and lanes every third of
// the lease TTL until ctx is done.
func (c *cluster) renewLoop(ctx context.Context) {
	waitctx.Every(ctx, c.leaseTTL/3, func() {
		c.renewProcessID(ctx)
		c.renewRuns(ctx)
		c.e.lanes.renew(ctx)
	})
}

// renewRuns extends the claim of every run executing here in one transaction,
// and interrupts those this process no longer owns (another took the run over,
// finished it or queued it to restart: its owner is not this incarnation) or
// that were cancelled. When the claims cannot be renewed (the store is
// unreachable, or slow past the renewal's bound), a run whose claim would lapse
// before the next renewal could land is stopped here (errLeaseLost), since
// another process may take it over then: it is not settled, and resumes from
// its checkpoint wherever it is recovered.
func (c *cluster) renewRuns(ctx context.Context) {
	ids := c.e.runner.inflight.ids()
	if len(ids) == 0 {
		return
	}
	var lost, cancelled []RunID
	until := c.e.clock.Now().Add(c.leaseTTL)
	rctx, cancel := context.WithTimeout(ctx, c.leaseTTL/3)
	err := c.e.store.Batch(rctx, func(tx Tx) error {
		lost, cancelled = nil, nil
		for _, id := range ids {
			r, err := tx.Run(id)
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			switch {
			case r.Owner != c.incarnation:
				lost = append(lost, id)
			case r.Status == RunCancelled:
				cancelled = append(cancelled, id)
			case r.Status != RunRunning:
				// Settling here right now (or paused): nothing to renew.
			default:
				r.LeaseUntil = until
				if _, err := tx.PutRun(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.e.log.Warn("renewing run claims failed; retrying", "runs", len(ids), "err", err)
		// Stop what would run on past its claim before the next renewal.
		for _, id := range ids {
			if u, ok := c.e.runner.inflight.claimUntil(id); ok && c.lapsesBeforeRenewal(u) {
				c.e.log.Warn("run's claim is about to lapse and cannot be renewed; stopping it here", "run", id)
				c.e.runner.inflight.cancelWith(id, errLeaseLost)
			}
		}
		return
	}
	for _, id := range ids {
		c.e.runner.inflight.setClaimUntil(id, until)
	}
	for _, id := range cancelled {
		c.e.runner.inflight.cancel(id)
	}
	for _, id := range lost {
		c.e.log.Warn("run was taken over or ended by another process; stopping it here", "run", id)
		c.e.runner.inflight.cancelWith(id, errLeaseLost)
	}
}

// sweepLoop recovers lapsed runs and wakes workers with queued work every
// sweepEvery until ctx is done: the truth behind the hints.
func (c *cluster) sweepLoop(ctx context.Context) {
	waitctx.Every(ctx, c.sweepEvery, func() {
		if _, err := c.recoverLapsed(ctx); err != nil && ctx.Err() == nil {
			c.e.log.Warn("recovering lapsed runs failed", "err", err)
		}
		c.wakeQueued(ctx)
		c.e.lanes.kickLocal()
	})
}

// recoverLapsed recovers the running runs whose claims lapsed and that do not
// execute here, as a restart would (recoverRunsTx); it reports how many. A run
// with no owner (stored before it was shared) counts as lapsed.
func (c *cluster) recoverLapsed(ctx context.Context) (int, error) {
	lapsed := func(tx ReadTx) ([]Run, error) {
		rs, err := tx.RunsByStatus(RunRunning)
		if err != nil {
			return nil, err
		}
		now := c.e.clock.Now()
		var out []Run
		for _, r := range rs {
			if c.e.runner.inflight.has(r.ID) || (r.Owner != "" && now.Before(r.LeaseUntil)) {
				continue
			}
			out = append(out, r)
		}
		return out, nil
	}
	var n int
	if err := c.e.store.View(ctx, func(tx ReadTx) error { // most sweeps find nothing: no write
		rs, err := lapsed(tx)
		n = len(rs)
		return err
	}); err != nil || n == 0 {
		return 0, err
	}
	var bots []string
	var rc recovered
	err := c.e.store.Update(ctx, func(tx Tx) error {
		rs, err := lapsed(tx)
		if err != nil {
			return err
		}
		n, bots = len(rs), nil
		for _, r := range rs {
			bots = append(bots, strings.TrimPrefix(string(r.Bot), "bot:"))
		}
		rc, err = c.e.runner.recoverRunsTx(tx, rs, false)
		return err
	})
	if err != nil {
		return 0, err
	}
	rc.log(c.e, "took over the work of a process whose claims lapsed")
	c.e.nudge(bots)
	return n, nil
}

// wakeQueued wakes this process's worker of every bot with a queued item.
func (c *cluster) wakeQueued(ctx context.Context) {
	var handles []string
	err := c.e.store.View(ctx, func(tx ReadTx) error {
		handles = nil // fn may run again (core.Store.View)
		for _, b := range c.e.cfg().order {
			if _, err := tx.NextQueued(b.ID(), func(InboxItem) bool { return false }); err == nil {
				handles = append(handles, b.Handle)
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			c.e.log.Warn("sweep of mailboxes failed", "err", err)
		}
		return
	}
	for _, h := range handles {
		c.e.sched.wakeLocal(h)
	}
}

// Hints between processes. The sender coalesces: a burst of wake-ups of one
// bot is one hint, and the pending set is bounded by the number of bots plus
// the cancels of runs in flight.

// hintMax bounds the hints waiting to be sent; beyond it they are dropped (the
// sweep finds the work).
const hintMax = 1024

type hintQueue struct {
	mu      sync.Mutex
	pending map[string]bool
	signal  chan struct{} // cap 1
}

// hint queues "<verb> <arg>" for the other processes (shared with hints only).
func (c *cluster) hint(verb, arg string) {
	if c.hints == nil {
		return
	}
	q := &c.hintq
	q.mu.Lock()
	if q.pending == nil {
		q.pending = map[string]bool{}
	}
	if len(q.pending) < hintMax {
		q.pending[verb+" "+arg] = true
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// hintTimeout bounds one hint sent.
const hintTimeout = 2 * time.Second

// hintSender sends queued hints until ctx is done.
func (c *cluster) hintSender(ctx context.Context) {
	q := &c.hintq
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.signal:
		}
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		for h := range batch {
			hctx, cancel := context.WithTimeout(ctx, hintTimeout)
			err := c.hints.Hint(hctx, c.incarnation+" "+h)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.e.log.Debug("hint not sent; the sweep finds the work", "hint", h, "err", err)
			}
		}
	}
}

// onHint acts on a hint from another process; this process's own are ignored.
func (c *cluster) onHint(payload string) {
	from, verb, arg, ok := splitHint(payload)
	if !ok || from == c.incarnation {
		return
	}
	switch verb {
	case "wake":
		if _, known := c.e.bot(arg); known {
			c.e.sched.wakeLocal(arg)
		}
	case "outbox":
		c.e.lanes.kickLocal()
	case "cancel":
		if id, err := strconv.ParseUint(arg, 10, 64); err == nil {
			c.e.runner.inflight.cancel(RunID(id))
		}
	}
}

// hintCancel tells the other processes to interrupt run id if it executes
// there (CancelRun); the renewal finds it cancelled otherwise.
func (c *cluster) hintCancel(id RunID) { c.hint("cancel", fmt.Sprint(uint64(id))) }
