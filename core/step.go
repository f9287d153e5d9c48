package core

import (
	"context"
	"encoding/json"
	"errors"
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
// is still stored and RecordStep returns why the checkpoint was not. An event
// that cannot be encoded is left out, the rest stored, and its error returned.
// The store's errors mean nothing was stored.
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
	ps, evErr := r.prepareStep(s)
	var (
		w     budgetWarnings
		cpErr error
	)
	// Batch (group commit, DESIGN.md §7): the steps of runs in flight share
	// commits too. fn resets what it captures, the ledger entry is keyed and the
	// run is read inside tx, so a re-run by Batch decides afresh.
	err := r.e.store.Batch(wctx, func(tx Tx) (err error) {
		cpErr = nil
		if w, err = ps.recordTx(tx); err != nil {
			return err
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
		return putCheckpointTx(tx, run, s.Checkpoint)
	})
	if err != nil {
		return err
	}
	ps.announce(w)
	r.stopIfLost(cpErr)
	if cpErr != nil {
		return errors.Join(fmt.Errorf("checkpoint: %w", cpErr), evErr)
	}
	if s.Checkpoint != nil {
		r.dropHeld() // the step's checkpoint is stored: it supersedes the held one
	}
	return evErr
}

// preparedStep is a Step's ledger entry and event, priced and encoded outside
// the transaction that stores them (recordTx).
type preparedStep struct {
	r      *runEnv
	call   bool
	entry  UsageEntry
	evType string
	ev     json.RawMessage
}

// prepareStep prices s's call and encodes its event. An event that cannot be
// encoded is left out, and its error returned; the rest of the step is still
// one to store (the call was paid for).
func (r *runEnv) prepareStep(s Step) (preparedStep, error) {
	ps := preparedStep{r: r, call: s.Call != nil, evType: s.EventType}
	if s.Call != nil {
		ps.entry = r.usageEntry(*s.Call)
	}
	if s.EventType != "" {
		var err error
		if ps.ev, err = json.Marshal(s.Event); err != nil {
			ps.ev = nil
			return ps, fmt.Errorf("run event %s: %w", s.EventType, err)
		}
	}
	return ps, nil
}

// recordTx stores the step's ledger entry and event inside tx, and returns the
// budget warnings the entry posted (announce them once tx committed). It
// captures nothing, so a re-run by Batch decides afresh.
func (ps preparedStep) recordTx(tx Tx) (budgetWarnings, error) {
	var w budgetWarnings
	if ps.call {
		var err error
		if w, err = ps.r.e.budgets.recordTx(tx, ps.entry, ps.r.job.channel); err != nil {
			return w, err
		}
	}
	if ps.ev != nil {
		if err := ps.r.eventTx(tx, ps.evType, ps.ev); err != nil {
			return w, err
		}
	}
	return w, nil
}

// announce logs and delivers the budget warnings of the committed step.
func (ps preparedStep) announce(w budgetWarnings) {
	if ps.call {
		w.announce(ps.r.e, ps.entry)
	}
}

// record stores the step's ledger entry and event in a transaction of their
// own, bounded by ctx, and announces its budget warnings once committed. Batch
// (group commit, DESIGN.md §7): the records of runs in flight share commits;
// recordTx captures nothing and the entry is keyed, so a re-run records it once.
func (ps preparedStep) record(ctx context.Context) error {
	var w budgetWarnings
	err := ps.r.e.store.Batch(ctx, func(tx Tx) (err error) {
		w, err = ps.recordTx(tx)
		return err
	})
	if err == nil {
		ps.announce(w)
	}
	return err
}

// recordAlone is record bounded by stepWriteTimeout whatever ctx's state: for
// the run's last step when the settle that was to carry it failed or never
// came, since the call was made and paid for all the same.
func (ps preparedStep) recordAlone(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepWriteTimeout)
	defer cancel()
	return ps.record(wctx)
}
