package core

import (
	"context"
	"errors"
	"slices"
)

// An ingest that wakes an idle bot starts the bot's run in its own transaction
// (DESIGN.md §7, group commit): without it a lone message paid two commits in a row
// before its model request, the ingest's and then the worker's pick. The run is
// started by the same pickTx the worker uses, under the same limits (the bot's
// parallel threads, the global run slots, one run per bot and thread), so whether
// the ingest or the worker picks, the same run starts.

// ingestPick is a run an ingest's transaction started: the worker state it holds
// (a global slot, the thread marked busy) and the job to execute.
type ingestPick struct {
	w   *worker
	job *Job
	// early: the run's goroutine was started inside the transaction, before its
	// commit (core/ingestgate.go); it owns the worker state and ends on its own
	// when job.ingested resolves with an error.
	early bool
}

// pickInIngestTx starts, inside an ingest's transaction tx, a run for each bot in
// woken whose worker is idle enough to start one now: it is running, not picking
// itself (its pick lock is free), below the bot's max_parallel_threads, and a
// global slot is free. It never waits: a bot that cannot start a run now is left
// to its worker (the caller wakes every woken bot's worker after the commit).
//
// Unless the store is shared, each run's goroutine starts here, before the
// commit, with its thread's snapshot and an open ingestGate (core/ingestgate.go).
// The picks hold worker state until their runs end, so the caller must settle
// them with settleIngestPicks once the transaction's outcome is known, and before
// Batch runs fn again.
//
// Each bot gets up to per runs (an IngestBatch's messages may wake it in many
// threads), each in a thread of its own.
func (e *Engine) pickInIngestTx(tx Tx, woken []string, per int) ([]ingestPick, error) {
	var picks []ingestPick
	for i, h := range woken {
		if slices.Index(woken, h) != i {
			continue // named twice
		}
		w := e.worker(h)
		bot, ok := e.bot(h)
		if w == nil || !ok || !w.pickMu.TryLock() {
			continue
		}
		var err error
		func() {
			defer w.pickMu.Unlock() // also when the pick panics: the worker must not stay locked out
			picks, err = e.pickBotInIngestTx(tx, w, bot, per, picks)
		}()
		if err != nil {
			return picks, err
		}
	}
	return picks, nil
}

// pickBotInIngestTx makes up to per picks of w's bot in tx, with w.pickMu held,
// and appends them to picks.
func (e *Engine) pickBotInIngestTx(tx Tx, w *worker, bot BotProfile, per int, picks []ingestPick) ([]ingestPick, error) {
	for range per {
		job, err := e.pickIdleTx(tx, w, bot)
		if err != nil || job == nil {
			return picks, err
		}
		p := ingestPick{w: w, job: job}
		if !e.shared {
			if job.snapshot, err = readSnapshot(tx, job.Thread.ID); err != nil {
				return append(picks, p), err
			}
			job.ingested = newIngestGate()
			p.early = w.run(job)
			if !p.early {
				job.ingested, job.snapshot = nil, nil
			}
		}
		picks = append(picks, p)
	}
	return picks, nil
}

// pickIdleTx is one pick of w's bot in tx when it may start a run now, with
// w.pickMu held; the picked thread is marked busy and a slot taken.
func (e *Engine) pickIdleTx(tx Tx, w *worker, bot BotProfile) (*Job, error) {
	w.mu.Lock()
	live := w.runCtx != nil && !w.closed
	w.mu.Unlock()
	if !live {
		return nil, nil
	}
	n, busy := w.inFlight()
	busy, room, err := e.busyAcrossTx(tx, bot, busy)
	if err != nil {
		return nil, err
	}
	if n >= bot.parallel() || room <= 0 || !e.sem.tryAcquire() {
		return nil, nil
	}
	job, err := e.pickTx(tx, bot, busy)
	if err != nil || job == nil {
		e.sem.release()
		return nil, err
	}
	w.setBusy(job.Thread.ID, true)
	return job, nil
}

// settleIngestPicks acts on the outcome err of the transaction that made picks
// (nil: committed). Runs started early are told through their gate: go on, or
// stop without a trace. Picks whose runs did not start are executed now after a
// commit, else their worker state is given back and the worker woken to look
// again (the item is queued again). A worker whose loop has returned
// (shutdown) starts nothing: its run stays running in the store and the next
// start recovers it (DESIGN.md §8), as any run a shutdown leaves.
func settleIngestPicks(picks []ingestPick, err error) {
	for _, p := range picks {
		switch {
		case p.early:
			p.job.ingested.resolve(err)
		case err == nil && p.w.run(p.job):
		default:
			p.w.setBusy(p.job.Thread.ID, false)
			p.w.e.sem.release()
			// The picked item is queued again, and the worker may have passed it
			// over while its thread was busy with this pick: it looks again.
			p.w.wakeUp()
		}
	}
}

// run executes job on a goroutine counted in w.runs, unless the loop has
// returned; the run's thread must be marked busy and a global slot held, both
// given back when it ends. It reports whether the run started.
func (w *worker) run(job *Job) bool {
	w.mu.Lock()
	if w.closed || w.runCtx == nil {
		w.mu.Unlock()
		return false
	}
	ctx := w.runCtx
	w.runs.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.runs.Done()
		w.e.execute(ctx, job)
		w.setBusy(job.Thread.ID, false)
		w.e.sem.release()
		w.wakeUp()
	}()
	return true
}

// mayPick reports whether bot's mailbox holds an item a pick might start, read
// without a write transaction: a wake-up that finds nothing (the worker's own
// after each run ends, most often) then costs no commit. The read skips only busy
// threads, so it may say yes where pickTx finds nothing, never the other way; a
// failed read says yes and leaves the error to the pick.
//
// Shared (core/shared.go), the bot's running runs in every process count too:
// their threads are busy and they fill its max_parallel_threads, so processes
// woken together for one item do not all queue for the write lock.
func (e *Engine) mayPick(ctx context.Context, bot BotProfile, busy func(ThreadID) bool) bool {
	found := true
	err := e.store.View(ctx, func(tx ReadTx) error {
		busyAny, room, err := e.busyAcrossTx(tx, bot, busy)
		if err != nil {
			return err
		}
		if room <= 0 {
			found = false
			return nil
		}
		_, err = tx.NextQueued(bot.ID(), func(it InboxItem) bool { return busyAny(it.Thread) })
		found = !errors.Is(err, ErrNotFound)
		return nil
	})
	return found || err != nil
}
