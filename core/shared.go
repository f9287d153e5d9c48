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
//   - Outbox lanes are leased per (account, conversation) (core/outbox.go).

// claimRun makes this process the owner of a run it starts (shared only).
func (e *Engine) claimRun(r *Run, now time.Time) {
	if e.shared {
		r.Owner, r.LeaseUntil = e.incarnation, now.Add(e.leaseTTL)
	}
}

// ownsRun reports whether this process may write r as its runner: always
// unshared; shared, only while it is r's owner.
func (e *Engine) ownsRun(r Run) bool { return !e.shared || r.Owner == e.incarnation }

// lapseRun ends this process's claim on a run that shutdown interrupted, so
// another process resumes it at its next sweep instead of after the TTL.
func (e *Engine) lapseRun(ctx context.Context, id RunID) {
	if !e.shared {
		return
	}
	err := e.store.Update(ctx, func(tx Tx) error {
		r, err := tx.Run(id)
		if err != nil || r.Owner != e.incarnation || r.Status != RunRunning {
			return err
		}
		r.LeaseUntil = time.Time{}
		_, err = tx.PutRun(r)
		return err
	})
	if err != nil {
		e.log.Warn("could not hand an interrupted run over; it is resumed when its claim lapses", "run", id, "err", err)
	}
}

// ErrProcessIDInUse is returned (wrapped) by Run when another live process
// holds this engine's process id (Options.ProcessID must be unique).
var ErrProcessIDInUse = errors.New("process id in use by another live process")

// claimProcessID takes the lease on this process's id for this incarnation
// (shared only). A predecessor with the same id that died holds it until it
// lapses, so it waits up to the lease TTL and a little more; a live process
// with the same id keeps it, and Run fails with ErrProcessIDInUse.
func (e *Engine) claimProcessID(ctx context.Context) error {
	if !e.shared {
		return nil
	}
	key := LeaseKeyProcess(e.procID)
	deadline := e.clock.Now().Add(e.leaseTTL + e.leaseTTL/2)
	for {
		_, holder, err := e.takeLease(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("core: claiming process id %q: %w", e.procID, err)
		case holder == "":
			return nil
		case !e.clock.Now().Before(deadline):
			return fmt.Errorf("core: process id %q: %w (store.process_id must differ between processes)", e.procID, ErrProcessIDInUse)
		}
		e.log.Warn("process id held by another process; waiting for it to lapse", "process", e.procID)
		if waitctx.Sleep(ctx, e.leaseTTL/4) != nil {
			return ctx.Err()
		}
	}
}

// renewProcessID extends the lease on this process's id. When another
// process holds it (this one was cut off past the TTL and a process with the
// same id started meanwhile), this process stops: Run ends with
// ErrProcessIDInUse, before it acts beside the other.
func (e *Engine) renewProcessID(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, e.leaseTTL/3)
	defer cancel()
	_, holder, err := e.takeLease(rctx, LeaseKeyProcess(e.procID))
	switch {
	case holder != "":
		e.log.Error("another process runs with this process id; stopping", "process", e.procID, "holder", holder)
		e.fail(fmt.Errorf("core: process id %q: %w (taken while this process was cut off from the store)", e.procID, ErrProcessIDInUse))
	case err != nil && ctx.Err() == nil:
		e.log.Warn("renewing the process id lease failed", "process", e.procID, "err", err)
	}
}

// dropProcessID releases this process's id at shutdown (shared only).
func (e *Engine) dropProcessID(ctx context.Context) {
	if !e.shared {
		return
	}
	e.dropLease(ctx, LeaseKeyProcess(e.procID))
}

// busyAcrossTx widens busy (the threads where this process runs bot; nil for
// none) to every thread where bot has a running run in any process, and
// returns how many more runs bot may start under its max_parallel_threads.
// Unshared, busy already says it all and the room is not bounded here: the
// callers (pick, mayPick) bound it by their own count.
func (e *Engine) busyAcrossTx(tx ReadTx, bot BotProfile, busy func(ThreadID) bool) (func(ThreadID) bool, int, error) {
	local := func(t ThreadID) bool { return busy != nil && busy(t) }
	if !e.shared {
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

// sharedLoops runs renewLoop, sweepLoop and the hint loops until ctx is done;
// they are owned by Run.
func (e *Engine) sharedLoops(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	if !e.shared {
		return
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		e.renewLoop(runCtx) // runs may outlive intake by the grace: keep their claims
	}()
	go func() {
		defer wg.Done()
		e.sweepLoop(ctx)
	}()
	if e.hints != nil {
		wg.Add(2)
		go func() {
			defer wg.Done()
			e.hintSender(runCtx)
		}()
		go func() {
			defer wg.Done()
			_ = e.hints.ListenHints(runCtx, e.onHint)
		}()
	}
}

// renewLoop extends the claims of this process's runs and lanes every third of
// the lease TTL until ctx is done.
func (e *Engine) renewLoop(ctx context.Context) {
	waitctx.Every(ctx, e.leaseTTL/3, func() {
		e.renewProcessID(ctx)
		e.renewRuns(ctx)
		e.lanes.renew(ctx)
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
func (e *Engine) renewRuns(ctx context.Context) {
	ids := e.ctl.ids()
	if len(ids) == 0 {
		return
	}
	var lost, cancelled []RunID
	until := e.clock.Now().Add(e.leaseTTL)
	rctx, cancel := context.WithTimeout(ctx, e.leaseTTL/3)
	err := e.store.Batch(rctx, func(tx Tx) error {
		lost, cancelled = nil, nil
		for _, id := range ids {
			r, err := tx.Run(id)
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			switch {
			case r.Owner != e.incarnation:
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
		e.log.Warn("renewing run claims failed; retrying", "runs", len(ids), "err", err)
		// Stop what would run on past its claim before the next renewal.
		for _, id := range ids {
			if u, ok := e.ctl.claimUntil(id); ok && e.lapsesBeforeRenewal(u) {
				e.log.Warn("run's claim is about to lapse and cannot be renewed; stopping it here", "run", id)
				e.ctl.cancelWith(id, errLeaseLost)
			}
		}
		return
	}
	for _, id := range ids {
		e.ctl.setClaimUntil(id, until)
	}
	for _, id := range cancelled {
		e.ctl.cancel(id)
	}
	for _, id := range lost {
		e.log.Warn("run was taken over or ended by another process; stopping it here", "run", id)
		e.ctl.cancelWith(id, errLeaseLost)
	}
}

// sweepLoop recovers lapsed runs and wakes workers with queued work every
// sweepEvery until ctx is done: the truth behind the hints.
func (e *Engine) sweepLoop(ctx context.Context) {
	waitctx.Every(ctx, e.sweepEvery, func() {
		if _, err := e.recoverLapsed(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("recovering lapsed runs failed", "err", err)
		}
		e.wakeQueued(ctx)
		e.kickLocal()
	})
}

// recoverLapsed recovers the running runs whose claims lapsed and that do not
// execute here, as a restart would (recoverRunsTx); it reports how many. A run
// with no owner (stored before it was shared) counts as lapsed.
func (e *Engine) recoverLapsed(ctx context.Context) (int, error) {
	lapsed := func(tx ReadTx) ([]Run, error) {
		rs, err := tx.RunsByStatus(RunRunning)
		if err != nil {
			return nil, err
		}
		now := e.clock.Now()
		var out []Run
		for _, r := range rs {
			if e.ctl.has(r.ID) || (r.Owner != "" && now.Before(r.LeaseUntil)) {
				continue
			}
			out = append(out, r)
		}
		return out, nil
	}
	var n int
	if err := e.store.View(ctx, func(tx ReadTx) error { // most sweeps find nothing: no write
		rs, err := lapsed(tx)
		n = len(rs)
		return err
	}); err != nil || n == 0 {
		return 0, err
	}
	var bots []string
	err := e.store.Update(ctx, func(tx Tx) error {
		rs, err := lapsed(tx)
		if err != nil {
			return err
		}
		n, bots = len(rs), nil
		for _, r := range rs {
			bots = append(bots, strings.TrimPrefix(string(r.Bot), "bot:"))
		}
		return e.recoverRunsTx(tx, rs, false, "took over the work of a process whose claims lapsed")
	})
	if err != nil {
		return 0, err
	}
	for _, h := range bots {
		e.wake(h)
	}
	e.kickOutbox()
	return n, nil
}

// wakeQueued wakes this process's worker of every bot with a queued item.
func (e *Engine) wakeQueued(ctx context.Context) {
	var handles []string
	err := e.store.View(ctx, func(tx ReadTx) error {
		for _, b := range e.cfg().order {
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
			e.log.Warn("sweep of mailboxes failed", "err", err)
		}
		return
	}
	for _, h := range handles {
		e.wakeLocal(h)
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
func (e *Engine) hint(verb, arg string) {
	if e.hints == nil {
		return
	}
	q := &e.hintq
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
func (e *Engine) hintSender(ctx context.Context) {
	q := &e.hintq
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
			err := e.hints.Hint(hctx, e.incarnation+" "+h)
			cancel()
			if err != nil && ctx.Err() == nil {
				e.log.Debug("hint not sent; the sweep finds the work", "hint", h, "err", err)
			}
		}
	}
}

// onHint acts on a hint from another process; this process's own are ignored.
func (e *Engine) onHint(payload string) {
	from, verb, arg, ok := splitHint(payload)
	if !ok || from == e.incarnation {
		return
	}
	switch verb {
	case "wake":
		if _, known := e.bot(arg); known {
			e.wakeLocal(arg)
		}
	case "outbox":
		e.kickLocal()
	case "cancel":
		if id, err := strconv.ParseUint(arg, 10, 64); err == nil {
			e.ctl.cancel(RunID(id))
		}
	}
}

// hintCancel tells the other processes to interrupt run id if it executes
// there (CancelRun); the renewal finds it cancelled otherwise.
func (e *Engine) hintCancel(id RunID) { e.hint("cancel", fmt.Sprint(uint64(id))) }
