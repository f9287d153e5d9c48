package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Steering (DESIGN.md §10, the operator console): cancel a run, stop what a bot
// has queued in a thread, pause and resume a bot. Every change is one store
// transaction recorded in the activity log with who made it; a cancelled run is
// terminal (recover never resumes it), its thread is told who stopped it, a
// question it waited on is closed with "cancelled by X" and held hand-offs of its
// bot are released as for a failed run.

// control is the engine's steering part: it cancels runs, stops a bot's work
// in a thread, carries out chat's /stop and pauses bots. Its state is the
// store's (runs, items, the pause cursors); the runs executing here are
// interrupted through the runner's registry of them (runner.inflight).
type control struct {
	e *Engine
}

// ErrRunFinished is returned by CancelRun for a run that already ended
// (completed, failed or cancelled); nothing changed.
var ErrRunFinished = errors.New("run already finished")

// ErrUnknownBot is returned by PauseBot, ResumeBot and StopQueued for a handle
// that is not a configured bot.
var ErrUnknownBot = errors.New("unknown bot")

// By names who steers: the person (or the console's admin identity) recorded
// in the activity log and named in the thread's notice, and where it came from.
type By struct {
	Actor ActorID
	// Name is shown to people ("stopped by Alice"); default Actor.
	Name string
	// Via is the account the request came through ("admin/api", "slack/acme").
	Via AccountID
}

func (b By) name() string {
	if b.Name != "" {
		return b.Name
	}
	if b.Actor != "" {
		return string(b.Actor)
	}
	return "an operator"
}

// Stopped counts what a stop changed: runs cancelled and queued items dropped.
type Stopped struct {
	Runs  []RunID `json:"runs"`
	Items int     `json:"items"`
}

// CancelRun cancels run id on behalf of by (DESIGN.md §10): in one transaction
// the run becomes cancelled (terminal, no checkpoint, so a restart never resumes
// it), its items are cancelled, a pending question of a waiting run is closed
// with "cancelled by <name>" and its buttons resolved, an approved call it was to
// carry out gets its outcome, a notice in the thread says who stopped it, held
// hand-offs are released; then the model call or tool in flight is interrupted.
// Errors: ErrNotFound for no such run, ErrRunFinished when it already ended,
// else store failures.
func (e *Engine) CancelRun(ctx context.Context, id RunID, by By) (Run, error) {
	return e.control.cancelRun(ctx, id, by)
}

// cancelRun is Engine.CancelRun.
func (ct *control) cancelRun(ctx context.Context, id RunID, by By) (Run, error) {
	var out Run
	var woken []string
	err := ct.e.store.Update(ctx, func(tx Tx) error {
		out, woken = Run{}, nil
		r, err := tx.Run(id)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			out = r
			return ErrRunFinished
		}
		out, woken, err = ct.cancelRunTx(tx, r, by)
		return err
	})
	if err != nil {
		return out, err
	}
	ct.afterCancel([]RunID{id}, woken, out.Bot)
	return out, nil
}

// afterCancel interrupts the cancelled runs in flight and wakes whom the change
// concerns.
func (ct *control) afterCancel(runs []RunID, woken []string, bot ActorID) {
	for _, id := range runs {
		ct.e.runner.inflight.cancel(id)
		ct.e.cluster.hintCancel(id) // shared: the run may execute in another process
	}
	if bot != "" {
		woken = append(woken, strings.TrimPrefix(string(bot), "bot:"))
	}
	ct.e.nudge(woken)
}

// cancelRunTx settles non-terminal run r as cancelled by by. It returns the run
// as stored and the handles woken by released hand-offs.
func (ct *control) cancelRunTx(tx Tx, r Run, by By) (Run, []string, error) {
	now := ct.e.clock.Now()
	was := r.Status
	who := by.name()
	r.Status, r.Error, r.Ended, r.Checkpoint = RunCancelled, "cancelled by "+who, now, nil
	r, err := tx.PutRun(r)
	if err != nil {
		return r, nil, err
	}
	if err := statusEventTx(tx, r.ID, now, map[string]any{"status": RunCancelled, "error": r.Error, "by": by.Actor}); err != nil {
		return r, nil, err
	}
	for _, id := range r.Items {
		it, err := tx.Item(id)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return r, nil, err
		}
		if it.Status == ItemQueued || it.Status == ItemProcessing {
			it.Status = ItemCancelled
			if _, err := tx.PutItem(it); err != nil {
				return r, nil, err
			}
		}
	}
	// A resume item (an answer, or a restart's) would find the run settled and be
	// dropped as stale; drop it now so the mailbox shows it gone.
	queued, err := tx.QueuedInThread(r.Bot, r.Thread)
	if err != nil {
		return r, nil, err
	}
	for _, it := range queued {
		if it.Kind == ItemResume && it.Run == r.ID {
			it.Status = ItemCancelled
			if _, err := tx.PutItem(it); err != nil {
				return r, nil, err
			}
		}
	}
	if err := ct.closeQuestionTx(tx, r, was, by); err != nil {
		return r, nil, err
	}
	t, err := tx.Thread(r.Thread)
	if err != nil {
		return r, nil, fmt.Errorf("run %d: thread %d: %w", r.ID, r.Thread, err)
	}
	handle := strings.TrimPrefix(string(r.Bot), "bot:")
	notice := systemNotice(r.ID, fmt.Sprintf("@%s's work here was stopped by %s.", handle, who))
	p, err := ct.e.router.postTx(tx, &t, postSpec{msg: notice})
	if err != nil {
		return r, nil, err
	}
	summary := fmt.Sprintf("run %d of @%s (%s) cancelled by %s", r.ID, handle, was, who)
	if by.Via != "" {
		summary += " via " + string(by.Via)
	}
	ct.e.activity(tx, Activity{Event: "run.cancelled", Level: "warn", Summary: summary, Thread: r.Thread, Actor: by.Actor, Run: r.ID})
	rel, err := ct.e.router.releaseHoldsTx(tx, r.Bot, r.Thread)
	return r, append(p.woken, rel...), err
}

// closeQuestionTx closes the question of a cancelled run: a pending one expires
// with "cancelled by <name>" (its buttons are resolved on every post, no resume
// is queued); an approved call without an outcome records why it did not run,
// or, when the run was carrying it out, that whether it ran is not known.
func (ct *control) closeQuestionTx(tx Tx, r Run, was RunStatus, by By) error {
	if r.Question == 0 {
		return nil
	}
	q, err := tx.Question(r.Question)
	if errors.Is(err, ErrNotFound) || err == nil && q.Run != r.ID {
		return nil
	} else if err != nil {
		return err
	}
	who := by.name()
	if q.Status == QuestionPending {
		now := ct.e.clock.Now()
		q.Status, q.Choice, q.Answer, q.AnsweredAt = QuestionExpired, ChoiceReject, cancelledAnswer+who, now
		q.AnsweredBy, q.AnsweredByName, q.AnsweredVia = by.Actor, who, by.Via
		if q, err = tx.PutQuestion(q); err != nil {
			return err
		}
		for _, p := range q.Posts {
			if _, err := tx.PutOutbox(OutboxEntry{Account: p.Account, Conversation: p.Conversation, Thread: q.Thread,
				Op: OpResolve, Question: q.ID, Status: OutboxPending, Created: now}); err != nil {
				return err
			}
		}
		ct.e.activity(tx, Activity{Event: "question.cancelled", Summary: fmt.Sprintf("question %d (%s): %s", q.ID, q.Kind, q.Decision()), Thread: q.Thread, Actor: by.Actor, Run: r.ID})
	}
	if q.Kind != QuestionApproval || q.Outcome != "" {
		return nil
	}
	if q.Approved() && was == RunRunning {
		return ct.e.questions.recordOutcomeTx(tx, r.ID, q.ID, "unknown: the run was cancelled by "+who+" while carrying out the approved call; check whether it ran")
	}
	return ct.e.questions.recordOutcomeTx(tx, r.ID, q.ID, "not run: the run was cancelled by "+who)
}

// cancelledAnswer prefixes Question.Answer of a question closed because its run
// was cancelled ("cancelled by Alice").
const cancelledAnswer = "cancelled by "

// StopQueued stops everything bot (a handle) has in thread on behalf of by: its
// queued items there are cancelled (the messages stay in the thread, no run
// takes them) and its runs there that have not ended are cancelled as by
// CancelRun. Errors: ErrUnknownBot, ErrNotFound for no such thread, else store
// failures.
func (e *Engine) StopQueued(ctx context.Context, bot string, thread ThreadID, by By) (Stopped, error) {
	return e.control.stopQueued(ctx, bot, thread, by)
}

// stopQueued is Engine.StopQueued.
func (ct *control) stopQueued(ctx context.Context, bot string, thread ThreadID, by By) (Stopped, error) {
	b, ok := ct.e.bot(strings.ToLower(strings.TrimPrefix(bot, "@")))
	if !ok {
		return Stopped{}, ErrUnknownBot
	}
	var out Stopped
	var woken []string
	err := ct.e.store.Update(ctx, func(tx Tx) error {
		out, woken = Stopped{}, nil
		if _, err := tx.Thread(thread); err != nil {
			return err
		}
		var err error
		out, woken, err = ct.stopBotTx(tx, b.ID(), thread, by)
		return err
	})
	if err != nil {
		return Stopped{}, err
	}
	ct.afterCancel(out.Runs, woken, b.ID())
	return out, nil
}

// stopBotTx cancels bot's queued items and non-terminal runs in thread.
func (ct *control) stopBotTx(tx Tx, bot ActorID, thread ThreadID, by By) (Stopped, []string, error) {
	var out Stopped
	var woken []string
	runs, err := activeRunsTx(tx, bot, thread)
	if err != nil {
		return out, nil, err
	}
	for _, r := range runs {
		_, w, err := ct.cancelRunTx(tx, r, by)
		if err != nil {
			return out, nil, err
		}
		out.Runs = append(out.Runs, r.ID)
		woken = append(woken, w...)
	}
	queued, err := tx.QueuedInThread(bot, thread)
	if err != nil {
		return out, nil, err
	}
	for _, it := range queued {
		it.Status = ItemCancelled
		if _, err := tx.PutItem(it); err != nil {
			return out, nil, err
		}
		out.Items++
	}
	if out.Items > 0 {
		handle := strings.TrimPrefix(string(bot), "bot:")
		ct.e.activity(tx, Activity{Event: "inbox.stopped", Level: "warn", Summary: fmt.Sprintf("%d queued item(s) of @%s stopped by %s", out.Items, handle, by.name()), Thread: thread, Actor: by.Actor})
		rel, err := ct.e.router.releaseHoldsTx(tx, bot, thread)
		if err != nil {
			return out, nil, err
		}
		woken = append(woken, rel...)
	}
	return out, woken, nil
}

// activeRunsTx returns bot's runs in thread that have not ended (queued,
// running or waiting for a person); bot "" means every bot's.
func activeRunsTx(tx ReadTx, bot ActorID, thread ThreadID) ([]Run, error) {
	var out []Run
	for _, st := range []RunStatus{RunQueued, RunRunning, RunWaitingHuman} {
		rs, err := tx.RunsByStatus(st)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.Thread == thread && (bot == "" || r.Bot == bot) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
