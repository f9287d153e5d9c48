package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// runEnv is the RunEnv core hands to an agent for one run.
type runEnv struct {
	e   *Engine
	job *Job
	// stream shows the answer while it is written (nil: no binding streams).
	stream *stream
	// held is the run's first checkpoint while core only holds it
	// (CheckpointHolder); mu guards it.
	mu   sync.Mutex
	held json.RawMessage
}

var (
	_ RunEnv           = (*runEnv)(nil)
	_ Noticer          = (*runEnv)(nil)
	_ OutcomeRecorder  = (*runEnv)(nil)
	_ TextStreamer     = (*runEnv)(nil)
	_ CheckpointHolder = (*runEnv)(nil)
	_ Summarizer       = (*runEnv)(nil)
)

// PutSummary implements Summarizer: one transaction, deduplicated by a seen
// key of thread, bot and covers.
func (r *runEnv) PutSummary(ctx context.Context, text string, covers MessageID) (Message, error) {
	key := fmt.Sprintf("summary:%d:%s:%d", r.job.Thread.ID, r.job.Bot.ID(), covers)
	var out Message
	err := r.e.store.Update(ctx, func(tx Tx) error {
		if id, err := tx.Seen(key); err == nil {
			out, err = tx.Message(id)
			return err
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		m, err := tx.PutMessage(Message{Thread: r.job.Thread.ID, Sender: r.job.Bot.ID(),
			SenderName: cmp.Or(r.job.Bot.Name, r.job.Bot.Handle), Text: text, Run: r.job.Run.ID,
			Kind: KindSummary, Covers: covers, Created: r.e.clock.Now()})
		if err != nil {
			return err
		}
		out = m
		return tx.MarkSeen(key, m.ID)
	})
	return out, err
}

// StreamText implements TextStreamer (core/stream.go).
func (r *runEnv) StreamText(text string) { r.stream.StreamText(text) }

// StreamWorking implements TextStreamer (core/stream.go).
func (r *runEnv) StreamWorking(tools ...string) { r.stream.StreamWorking(tools...) }

func (r *runEnv) Messages(ctx context.Context, after MessageID, limit int) ([]Message, error) {
	var out []Message
	err := r.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		out, err = tx.Messages(r.job.Thread.ID, after, limit)
		return err
	})
	return out, err
}

func (r *runEnv) MessagesBefore(ctx context.Context, before MessageID, limit int) ([]Message, error) {
	var out []Message
	err := r.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		out, err = tx.MessagesBefore(r.job.Thread.ID, before, limit)
		return err
	})
	return out, err
}

func (r *runEnv) Count(ctx context.Context) (int, error) {
	var n int
	err := r.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		n, err = tx.CountMessages(r.job.Thread.ID)
		return err
	})
	return n, err
}

func (r *runEnv) RecordEvent(ctx context.Context, typ string, payload any) error {
	ps, err := r.prepareStep(Step{EventType: typ, Event: payload})
	if err != nil {
		return err
	}
	return ps.record(ctx) // appends only, so a re-run by Batch writes it once
}

// eventTx appends the run event typ with its encoded payload inside tx.
func (r *runEnv) eventTx(tx Tx, typ string, payload json.RawMessage) error {
	_, err := tx.AppendRunEvent(RunEvent{Run: r.job.Run.ID, Type: typ, Payload: payload, At: r.e.clock.Now()})
	return err
}

// Checkpoint stores the agent's step checkpoint on the run, durably (one
// committed transaction), while the run is running; a run settled meanwhile
// keeps no transcript (seed G5) and the call fails. A restart resumes a running
// run from it (DESIGN.md §8, recover).
func (r *runEnv) Checkpoint(ctx context.Context, transcript json.RawMessage) error {
	// Batch (group commit, DESIGN.md §7): checkpoints of runs in flight share
	// commits; fn reads the run inside tx, so a re-run by Batch decides afresh.
	err := r.e.store.Batch(ctx, func(tx Tx) error { return r.checkpointTx(tx, transcript) })
	if err == nil {
		r.dropHeld()
	}
	r.stopIfLost(err)
	return err
}

// HoldCheckpoint implements CheckpointHolder.
func (r *runEnv) HoldCheckpoint(transcript json.RawMessage) {
	r.mu.Lock()
	r.held = transcript
	r.mu.Unlock()
}

// dropHeld forgets the held first checkpoint once a checkpoint of the run is
// stored (a step's supersedes it). It is dropped only after that commit: until
// then storeHeld must still be able to store it before the run is seen, and
// shutdown must still find it when the step's write fails; storeHeld never
// replaces a checkpoint stored first (it reads the run inside its transaction).
func (r *runEnv) dropHeld() {
	r.mu.Lock()
	r.held = nil
	r.mu.Unlock()
}

// transcript is run's last checkpoint as the agent left it: the stored one, or
// else the first checkpoint core still holds (nil: none). run is the run as
// read in the settling transaction.
func (r *runEnv) transcript(run Run) json.RawMessage {
	if len(run.Checkpoint) > 0 {
		return run.Checkpoint
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// storeHeld stores the held first checkpoint (CheckpointHolder) before the run
// is first seen: the stream calls it before its first post. The write is bounded by
// stepWriteTimeout. A checkpoint a step stored first is kept (read inside the
// transaction, so a step's write that commits first wins). Nothing held, or held
// no longer, is nil; an error means it was not stored (it stays held) and the
// caller must not show anything.
func (r *runEnv) storeHeld(ctx context.Context) error {
	r.mu.Lock()
	cp := r.held
	r.mu.Unlock()
	if cp == nil {
		return nil
	}
	// Batch (group commit, DESIGN.md §7); fn reads the run inside tx, so a
	// re-run decides afresh.
	wctx, cancel := context.WithTimeout(ctx, stepWriteTimeout)
	defer cancel()
	err := r.e.store.Batch(wctx, func(tx Tx) error {
		run, err := r.checkpointable(tx)
		if err != nil {
			return err
		}
		if len(run.Checkpoint) > 0 {
			return nil // a step's checkpoint came first
		}
		return putCheckpointTx(tx, run, cp)
	})
	if err == nil {
		r.dropHeld() // stored, or a step's is: it is not needed again
	}
	r.stopIfLost(err)
	return err // on failure it stays held, for shutdown or the reflection
}

// checkpointTx stores transcript as the run's checkpoint inside tx while the run
// is running and this process owns it (checkpointable); it writes nothing when
// it fails.
func (r *runEnv) checkpointTx(tx Tx, transcript json.RawMessage) error {
	run, err := r.checkpointable(tx)
	if err != nil {
		return err
	}
	return putCheckpointTx(tx, run, transcript)
}

// putCheckpointTx stores run with transcript as its checkpoint inside tx.
func putCheckpointTx(tx Tx, run Run, transcript json.RawMessage) error {
	run.Checkpoint = append(json.RawMessage(nil), transcript...)
	_, err := tx.PutRun(run)
	return err
}

// checkpointable reads the run inside tx and says why it takes no checkpoint:
// it is not running, or another process claimed it (errLeaseLost: the caller
// stops the run here with stopIfLost once tx ended). It writes nothing.
func (r *runEnv) checkpointable(tx Tx) (Run, error) {
	run, err := tx.Run(r.job.Run.ID)
	if err != nil {
		return run, err
	}
	if !r.e.cluster.ownsRun(run) {
		return run, fmt.Errorf("run %d: %w", run.ID, errLeaseLost)
	}
	if run.Status != RunRunning {
		return run, fmt.Errorf("run %d is %s, not running", run.ID, run.Status)
	}
	return run, nil
}

// stopIfLost stops the run here when err says another process claimed it
// (checkpointable), after the transaction that found it out: the store may run
// a transaction more than once, so its callback has no effects of its own.
func (r *runEnv) stopIfLost(err error) {
	if errors.Is(err, errLeaseLost) {
		r.e.runner.inflight.cancelWith(r.job.Run.ID, errLeaseLost) // another process has it: stop here
	}
}

// Post posts a progress message from the bot mid-run, routed like a reply.
func (r *runEnv) Post(ctx context.Context, text string) (MessageID, error) {
	return r.post(ctx, botReply(r.job, text))
}

// post posts spec into the run's thread in one transaction, then wakes whom
// it woke and the outbox.
func (r *runEnv) post(ctx context.Context, spec postSpec) (MessageID, error) {
	var p posted
	err := r.e.store.Update(ctx, func(tx Tx) error {
		t, err := tx.Thread(r.job.Thread.ID)
		if err != nil {
			return err
		}
		p, err = r.e.router.postTx(tx, &t, spec)
		return err
	})
	if err != nil {
		return 0, err
	}
	r.e.nudge(p.woken)
	return p.msg.ID, nil
}

func (r *runEnv) Todo(ctx context.Context) ([]TodoItem, error) {
	var out []TodoItem
	err := r.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		out, err = tx.Todo(r.job.Bot.ID(), r.job.Thread.ID)
		return err
	})
	return out, err
}

func (r *runEnv) SetTodo(ctx context.Context, items []TodoItem) error {
	return r.e.store.Update(ctx, func(tx Tx) error {
		return tx.PutTodo(r.job.Bot.ID(), r.job.Thread.ID, items)
	})
}

// Notice posts a system notice into the run's thread (Noticer).
func (r *runEnv) Notice(ctx context.Context, text string) error {
	_, err := r.post(ctx, postSpec{msg: systemNotice(r.job.Run.ID, text)})
	return err
}

// RecordOutcome stores what became of an approved call on its question
// (OutcomeRecorder); only a question of this run can be changed.
func (r *runEnv) RecordOutcome(ctx context.Context, id QuestionID, outcome string) error {
	return r.e.store.Update(ctx, func(tx Tx) error {
		return r.e.questions.recordOutcomeTx(tx, r.job.Run.ID, id, outcome)
	})
}
