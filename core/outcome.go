package core

import (
	"errors"
	"fmt"
)

// Outcomes of approved calls (DESIGN.md §5): an approved call runs exactly once,
// or the thread is told why it could not, and the question records which.

// OutcomeRan is Question.Outcome of an approved call that ran.
const OutcomeRan = "ran"

// recordOutcomeTx sets the outcome of question id, which must belong to run.
func (qs *questions) recordOutcomeTx(tx Tx, run RunID, id QuestionID, outcome string) error {
	q, err := tx.Question(id)
	if err != nil {
		return fmt.Errorf("question %d: %w", id, err)
	}
	if q.Run != run {
		return fmt.Errorf("question %d belongs to run %d, not %d", id, q.Run, run)
	}
	if q.Outcome == outcome {
		return nil
	}
	q.Outcome = outcome
	if _, err := tx.PutQuestion(q); err != nil {
		return err
	}
	summary := fmt.Sprintf("question %d (%s %s): %s", q.ID, q.Kind, q.Tool, outcome)
	level := ""
	if outcome != OutcomeRan {
		level = "warn"
	}
	qs.e.activity(tx, Activity{Event: "question.outcome", Level: level, Summary: summary, Thread: q.Thread, Actor: q.Bot, Run: run})
	return nil
}

// unrunApprovalTx records "not run" on the approved question a failed resumed
// run was to carry out, when the agent recorded no outcome: the run failed
// before the call ran (its notice in the thread says why).
func (qs *questions) unrunApprovalTx(tx Tx, job *Job, cause string) error {
	if job.Resume == nil || !job.Resume.Approved() {
		return nil
	}
	q, err := tx.Question(job.Resume.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if q.Outcome != "" {
		return nil
	}
	return qs.recordOutcomeTx(tx, job.Run.ID, q.ID, "not run: the run failed before the call ran: "+cause)
}

// OutcomeInterrupted is Question.Outcome of an approved call whose run was
// carrying it out when openbot stopped without settling the run: whether the
// call ran is not known.
const OutcomeInterrupted = "unknown: openbot stopped while the run was carrying out the approved call; check whether it ran before approving it again"

// interruptedApprovalTx records OutcomeInterrupted on the approved question a
// run found running at start (recover) was resumed for, when no outcome was
// recorded.
func (qs *questions) interruptedApprovalTx(tx Tx, r Run) error {
	if r.Question == 0 {
		return nil
	}
	q, err := tx.Question(r.Question)
	if errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if !q.Approved() || q.Outcome != "" || q.Run != r.ID {
		return nil
	}
	return qs.recordOutcomeTx(tx, r.ID, q.ID, OutcomeInterrupted)
}
