package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Step is what a run stores once one model call has answered: the call's
// ledger entry, its run event and the run's checkpoint after it (a step
// boundary, DESIGN.md §8). StepRecorder stores them in one transaction
// (DESIGN.md §7: every multi-record change is one transaction), so a step costs
// the store one write, not three.
type Step struct {
	// Call is the model call for the usage ledger (as Meter.RecordModelCall);
	// nil: none.
	Call *ModelCall
	// EventType names the run event (as RunEnv.RecordEvent) and Event is its
	// payload, encoded as JSON; EventType "": none.
	EventType string
	Event     any
	// Checkpoint is the run's checkpoint after the step (as RunEnv.Checkpoint);
	// nil: the last one stays.
	Checkpoint json.RawMessage
}

// StepRecorder is an optional capability of the RunEnv core provides.
// RecordStep stores a Step in one transaction. The ledger entry and the event
// are stored even when ctx has ended meanwhile: the call was made and paid for
// (bounded by stepWriteTimeout instead). The checkpoint is stored only while ctx
// is live and the run is running and owned by this process; otherwise the rest
// is still stored and RecordStep returns why the checkpoint was not. Other
// errors (an event that cannot be encoded, the store's) mean nothing was stored.
type StepRecorder interface {
	RecordStep(ctx context.Context, s Step) error
}

var _ StepRecorder = (*runEnv)(nil)

// stepWriteTimeout bounds RecordStep's write, which the run's own context does
// not bound (StepRecorder).
const stepWriteTimeout = 10 * time.Second

// RecordStep implements StepRecorder.
func (r *runEnv) RecordStep(ctx context.Context, s Step) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepWriteTimeout)
	defer cancel()
	if err := r.landed(wctx); err != nil {
		return err
	}
	var ev json.RawMessage
	if s.EventType != "" {
		var err error
		if ev, err = json.Marshal(s.Event); err != nil {
			return fmt.Errorf("run event %s: %w", s.EventType, err)
		}
	}
	var entry UsageEntry
	if s.Call != nil {
		entry = r.usageEntry(*s.Call)
	}
	var (
		w     budgetWarnings
		cpErr error
	)
	// Batch (group commit, DESIGN.md §7): the steps of runs in flight share
	// commits too. fn resets what it captures, the ledger entry is keyed and the
	// run is read inside tx, so a re-run by Batch decides afresh.
	err := r.e.store.Batch(wctx, func(tx Tx) (err error) {
		w, cpErr = budgetWarnings{}, nil
		if s.Call != nil {
			if w, err = r.e.recordUsageTx(tx, entry); err != nil {
				return err
			}
		}
		if ev != nil {
			if err := r.eventTx(tx, s.EventType, ev); err != nil {
				return err
			}
		}
		if s.Checkpoint == nil {
			return nil
		}
		if cpErr = ctx.Err(); cpErr != nil {
			return nil
		}
		run, why := r.checkpointable(tx)
		if cpErr = why; why != nil {
			return nil // the rest is stored without it
		}
		run.Checkpoint = append(json.RawMessage(nil), s.Checkpoint...)
		_, err = tx.PutRun(run)
		return err
	})
	if err != nil {
		return err
	}
	if s.Call != nil {
		w.announce(r.e, entry)
	}
	if cpErr != nil {
		return fmt.Errorf("checkpoint: %w", cpErr)
	}
	return nil
}
