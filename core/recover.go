package core

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// MaxRestartsBeforeFirstStep bounds how many times recover starts a run again
// from the beginning because the process died before the run's first step
// checkpoint: a run whose process dies that way a third time (two restarts
// already) fails with the "interrupted" notice, so a run that crashes the
// process is not retried forever (DESIGN.md §8).
const MaxRestartsBeforeFirstStep = 2

// recover repairs what an earlier process left in flight (seed §7, DESIGN.md §8).
// A running run with a step checkpoint (Run.Checkpoint) resumes: it becomes
// queued with a resume item in its bot's mailbox, its processing items stay
// processing, and the pick that takes the item hands the agent a Job with
// Restart set (pickRestartTx); a queued run left so by an earlier start keeps
// its resume item. A running run without a checkpoint has done nothing visible
// yet (its first checkpoint is stored before any tool call or streamed text,
// CheckpointHolder): it is queued the same way and started again from the
// beginning under the same run id with the same triggers (Run.Restarts counts
// these, up to MaxRestartsBeforeFirstStep). Any other running or queued run
// without a checkpoint cannot resume: it becomes failed with a notice in its
// thread, its processing items fail, and held hand-offs of its bot are released
// when their queue allows. Queued items
// stay queued and are picked as usual; waiting_human runs and their questions
// are untouched; pending outbox entries are delivered by the lanes once they
// start.
func (rn *runner) recover(ctx context.Context) error {
	if rn.e.cluster.shared {
		// Other processes may be running their runs right now: take over only
		// the runs whose claims lapsed (core/shared.go), here and every sweep.
		_, err := rn.e.cluster.recoverLapsed(ctx)
		return err
	}
	var rc recovered
	err := rn.e.store.Update(ctx, func(tx Tx) error {
		var rs []Run
		for _, st := range []RunStatus{RunRunning, RunQueued} {
			more, err := tx.RunsByStatus(st)
			if err != nil {
				return err
			}
			rs = append(rs, more...)
		}
		var err error
		rc, err = rn.recoverRunsTx(tx, rs, true)
		return err
	})
	if err == nil {
		rc.log(rn.e, "recovered after restart")
	}
	return err
}

// recovered counts what recoverRunsTx repaired, logged once its transaction
// committed (the store may run the transaction more than once).
type recovered struct{ resumed, failedRuns, failedItems int }

// log reports rc at WARN when anything was repaired; what names the occasion.
func (rc recovered) log(e *Engine, what string) {
	if rc.resumed > 0 || rc.failedRuns > 0 || rc.failedItems > 0 {
		e.log.Warn(what, "resumed_runs", rc.resumed, "failed_runs", rc.failedRuns, "failed_items", rc.failedItems)
	}
}

// recoverRunsTx repairs rs (running or queued runs whose process is gone) as
// recover describes. With orphans, every processing item that no resumed run
// keeps fails too (the whole store was in flight); without, only the items of
// the runs in rs are touched (other processes' runs go on). It returns what it
// repaired, for the caller to log once tx committed.
func (rn *runner) recoverRunsTx(tx Tx, rs []Run, orphans bool) (recovered, error) {
	var stale, resumed []Run
	for _, r := range rs {
		switch {
		case len(r.Checkpoint) > 0:
			resumed = append(resumed, r)
		case r.Status == RunRunning && r.Restarts < MaxRestartsBeforeFirstStep:
			r.Restarts++ // dies before its first step: start it again
			resumed = append(resumed, r)
		case r.Status == RunQueued && r.Restarts > 0:
			resumed = append(resumed, r) // queued to start again by an earlier start
		default:
			stale = append(stale, r)
		}
	}
	keep := map[ItemID]bool{}
	for _, r := range resumed {
		if err := rn.queueRestartTx(tx, r); err != nil {
			return recovered{}, err
		}
		for _, id := range r.Items {
			keep[id] = true
		}
	}
	now := rn.e.clock.Now()
	for _, r := range stale {
		r.Status, r.Error, r.Ended, r.Checkpoint = RunFailed, "server restarted", now, nil
		r.Owner, r.LeaseUntil = "", time.Time{}
		if _, err := tx.PutRun(r); err != nil {
			return recovered{}, err
		}
		if err := statusEventTx(tx, r.ID, now, map[string]any{"status": RunFailed, "error": r.Error}); err != nil {
			return recovered{}, err
		}
		t, err := tx.Thread(r.Thread)
		if err != nil {
			return recovered{}, fmt.Errorf("run %d: thread %d: %w", r.ID, r.Thread, err)
		}
		handle := strings.TrimPrefix(string(r.Bot), "bot:")
		notice := systemNotice(r.ID, fmt.Sprintf("@%s's work here was interrupted because openbot restarted. Send a message to start again.", handle))
		if _, err := rn.e.router.postTx(tx, &t, postSpec{msg: notice}); err != nil {
			return recovered{}, err
		}
		rn.e.activity(tx, Activity{Event: "run.recovered", Level: "warn", Summary: notice.Text, Thread: r.Thread, Actor: r.Bot, Run: r.ID})
		if err := rn.e.questions.interruptedApprovalTx(tx, r); err != nil {
			return recovered{}, err
		}
	}
	var items []InboxItem
	if orphans {
		var err error
		if items, err = tx.ItemsByStatus(ItemProcessing); err != nil {
			return recovered{}, err
		}
	} else {
		for _, r := range stale {
			for _, id := range r.Items {
				it, err := tx.Item(id)
				if err != nil {
					return recovered{}, err
				}
				if it.Status == ItemProcessing {
					items = append(items, it)
				}
			}
		}
	}
	failed := 0
	for _, it := range items {
		if keep[it.ID] {
			continue
		}
		it.Status = ItemFailed
		if _, err := tx.PutItem(it); err != nil {
			return recovered{}, err
		}
		failed++
	}
	for _, r := range stale {
		if _, err := rn.e.router.releaseHoldsTx(tx, r.Bot, r.Thread); err != nil {
			return recovered{}, err
		}
	}
	return recovered{resumed: len(resumed), failedRuns: len(stale), failedItems: failed}, nil
}

// queueRestartTx makes a run a restart interrupted queued with one queued
// resume item, so its bot's worker picks it up like any other work. A running
// run is stored (with its Restarts as the caller set it).
func (rn *runner) queueRestartTx(tx Tx, r Run) error {
	now := rn.e.clock.Now()
	if r.Status != RunQueued {
		r.Status = RunQueued
		r.Owner, r.LeaseUntil = "", time.Time{} // anyone's to pick
		if _, err := tx.PutRun(r); err != nil {
			return err
		}
		if err := statusEventTx(tx, r.ID, now, map[string]any{"status": RunQueued, "restart": true}); err != nil {
			return err
		}
	}
	queued, err := tx.ItemsByStatus(ItemQueued)
	if err != nil {
		return err
	}
	for _, it := range queued {
		if it.Kind == ItemResume && it.Run == r.ID {
			return nil
		}
	}
	if _, err := tx.PutItem(InboxItem{Actor: r.Bot, Thread: r.Thread, Kind: ItemResume, Run: r.ID, Status: ItemQueued, Created: now}); err != nil {
		return err
	}
	how := "it resumes from its last step"
	if len(r.Checkpoint) == 0 {
		how = fmt.Sprintf("it had no step yet and starts again from the beginning (restart %d of %d)", r.Restarts, MaxRestartsBeforeFirstStep)
	}
	rn.e.activity(tx, Activity{Event: "run.interrupted", Level: "warn", Summary: fmt.Sprintf("run %d was interrupted by a restart; %s", r.ID, how), Thread: r.Thread, Actor: r.Bot, Run: r.ID})
	return nil
}
