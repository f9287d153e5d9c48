package core

import (
	"context"
	"fmt"
	"strings"
)

// recover repairs what an earlier process left in flight (seed §7, DESIGN.md §8):
// running and queued runs become failed with a notice in their thread, their
// processing items fail, and held hand-offs of those bots are released when their
// queue allows. Queued items stay queued and are picked as usual; waiting_human
// runs and their questions are untouched; pending outbox entries are delivered by
// the lanes once they start.
//
// Agents checkpoint their transcript on the run after every step, so a later change
// can resume a running run from its Checkpoint here instead of failing it; for now
// it is dropped with the run, as for every terminal run (seed G5).
func (e *Engine) recover(ctx context.Context) error {
	return e.store.Update(ctx, func(tx Tx) error {
		var stale []Run
		for _, st := range []RunStatus{RunRunning, RunQueued} {
			rs, err := tx.RunsByStatus(st)
			if err != nil {
				return err
			}
			stale = append(stale, rs...)
		}
		now := e.clock.Now()
		for _, r := range stale {
			r.Status, r.Error, r.Ended, r.Checkpoint = RunFailed, "server restarted", now, nil
			if _, err := tx.PutRun(r); err != nil {
				return err
			}
			if _, err := tx.AppendRunEvent(RunEvent{Run: r.ID, Type: "status", Payload: mustJSON(map[string]any{"status": RunFailed, "error": r.Error}), At: now}); err != nil {
				return err
			}
			t, err := tx.Thread(r.Thread)
			if err != nil {
				return fmt.Errorf("run %d: thread %d: %w", r.ID, r.Thread, err)
			}
			handle := strings.TrimPrefix(string(r.Bot), "bot:")
			notice := Message{Sender: SystemActor, SenderName: "system", Kind: KindNotice, Run: r.ID,
				Text: fmt.Sprintf("@%s's work here was interrupted because openbot restarted. Send a message to start again.", handle)}
			if _, err := e.postTx(tx, &t, postSpec{msg: notice}); err != nil {
				return err
			}
			e.activity(tx, Activity{Event: "run.recovered", Level: "warn", Summary: notice.Text, Thread: r.Thread, Actor: r.Bot, Run: r.ID})
			if err := e.interruptedApprovalTx(tx, r); err != nil {
				return err
			}
		}
		items, err := tx.ItemsByStatus(ItemProcessing)
		if err != nil {
			return err
		}
		for _, it := range items {
			it.Status = ItemFailed
			if _, err := tx.PutItem(it); err != nil {
				return err
			}
		}
		for _, r := range stale {
			if _, err := e.releaseHoldsTx(tx, r.Bot, r.Thread); err != nil {
				return err
			}
		}
		if len(stale) > 0 || len(items) > 0 {
			e.log.Warn("recovered after restart", "failed_runs", len(stale), "failed_items", len(items))
		}
		return nil
	})
}
