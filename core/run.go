package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// runner is the engine's part for runs and steps (seed §5 to §8): it executes
// a picked run's agent with its RunEnv (core/runenv.go, core/step.go), shows
// that the bot works (core/workshow.go) and streams its answer (core/stream.go),
// settles the run (reply, failure notice, pause for a question), and recovers
// runs a restart or a dead process left in flight (core/recover.go). It owns
// the agent, the runs executing in this process (inflight, so they can be
// interrupted) and the reflection hook.
type runner struct {
	e           *Engine
	agent       Agent
	reflections Reflections // nil: no reflection (core/memory.go)
	// inflight holds the cancel functions of the runs executing here now.
	inflight runCancels
}

// execute runs the agent and settles the run: reply posted, items done, held
// hand-offs released; or failed with a notice in the thread naming the cause.
// A run that shutdown cancelled is not settled: it stays running with its last
// step checkpoint and the next start resumes it (DESIGN.md §8, recover).
func (rn *runner) execute(ctx context.Context, job *Job) {
	ctx, cancel := context.WithTimeout(ctx, rn.e.cfg().limits.RunTimeout)
	defer cancel()
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	rn.inflight.add(job.Run.ID, cancelRun) // CancelRun interrupts the run (core/control.go)
	if rn.e.cluster.shared {
		rn.inflight.setClaimUntil(job.Run.ID, job.Run.LeaseUntil)
	}
	defer rn.inflight.remove(job.Run.ID)
	start := rn.observeRunStart(job)
	rn.inflight.cancelIfSettled(ctx, rn.e.store, job.Run.ID, cancelRun) // cancelled between pick and here
	env := &runEnv{e: rn.e, job: job}
	job.Env = env
	work := rn.startWork(ctx, job)
	env.stream = rn.startStream(ctx, job, env.storeHeld)
	// Cost control: a new run of a bot (or in a thread) whose budget is spent
	// is refused with a notice naming it; a resumed run stops at its next model call.
	var (
		res Result
		err error
	)
	if job.Resume == nil && !job.Restart {
		err = rn.e.budgets.check(ctx, job)
	}
	if err == nil {
		res, err = rn.agent.Execute(ctx, job)
	}
	stopped := ctx.Err() == context.Canceled && rn.e.isStopping() && !errors.Is(context.Cause(ctx), errCancelled)
	// A run stopped because its claim lapsed or moved (core/shared.go) is not
	// this process's to settle: it is left as a shutdown leaves it.
	stopped = stopped || errors.Is(context.Cause(ctx), errLeaseLost)
	if err == nil && ctx.Err() != nil && !stopped {
		err = ctx.Err()
	}
	// The run's last step is stored with its settling (Result.Step), or
	// alone when there is none or it fails: the call was made and paid for.
	var (
		last  *preparedStep
		lastW budgetWarnings
	)
	if res.Step != nil {
		ps, perr := env.prepareStep(*res.Step)
		if perr != nil {
			rn.e.log.Warn("record the run's last step", "run", job.Run.ID, "err", perr)
		}
		last = &ps // its ledger entry at least
	}
	lastAlone := func(ctx context.Context) { // when no settle carries it
		if last == nil {
			return
		}
		if err := last.recordAlone(ctx); err != nil {
			rn.e.log.Warn("record the run's last step", "run", job.Run.ID, "err", err)
		}
	}
	// The reply's delivery edits the streamed messages (core/stream.go).
	streamed := env.stream.finish()
	if err != nil && stopped {
		// Shutdown cancelled the run: it stays running with its last step
		// checkpoint and the next start resumes it (DESIGN.md §8). What it
		// streamed is removed; the resumed run streams and posts its reply anew.
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			rn.e.log.Warn("run stopped here: its claim lapsed or moved; it resumes from its checkpoint wherever it is recovered", "run", job.Run.ID, "bot", job.Bot.Handle)
		} else if rn.e.cluster.shared {
			rn.e.log.Info("run interrupted by shutdown; another process resumes it", "run", job.Run.ID, "bot", job.Bot.Handle)
		} else {
			rn.e.log.Info("run interrupted by shutdown; the next start resumes it", "run", job.Run.ID, "bot", job.Bot.Handle)
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), rn.e.grace)
		defer dcancel()
		lastAlone(dctx)
		// A first checkpoint still held is stored, so the next start resumes
		// the run rather than counting a restart before its first step.
		if err := env.storeHeld(dctx); err != nil && !errors.Is(err, errLeaseLost) {
			rn.e.log.Warn("store the run's first checkpoint at shutdown", "run", job.Run.ID, "err", err)
		}
		rn.e.cluster.lapseRun(dctx, job.Run.ID) // shared: another process resumes it now, not after the TTL
		env.stream.discard(dctx, streamed)
		env.stream.forget(dctx)
		work.end(dctx)
		return
	}
	var unused map[laneKey][]string
	// Settle with a fresh context: the run's may be done.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), rn.e.grace)
	defer scancel()
	var woken []string
	cancelled, reflect, lost := false, false, false
	// Batch (group commit, DESIGN.md §7): settles of runs in flight share commits
	// with ingests and picks. fn may run again: it resets what it captures first
	// and reads everything it decides on inside tx.
	serr := rn.e.store.Batch(sctx, func(tx Tx) error {
		woken, cancelled, reflect, lost = nil, false, false, false
		unused = streamedCopy(streamed)
		if last != nil {
			// The call was made and paid for, whatever became of the run.
			var err2 error
			if lastW, err2 = last.recordTx(tx); err2 != nil {
				return err2
			}
		}
		r, err2 := tx.Run(job.Run.ID)
		if err2 != nil {
			return err2
		}
		if !rn.e.cluster.ownsRun(r) {
			// Our claim lapsed and another process took the run over
			// (core/shared.go): what this process did is not the run's.
			lost = true
			return nil
		}
		// The streamed messages are the reply's delivery's now, or discarded below.
		r.Streamed = nil
		r.LeaseUntil = time.Time{} // Owner stays: who ran it
		if r.Status == RunCancelled {
			// CancelRun settled it (core/control.go); keep only its usage.
			cancelled = true
			r.Usage = r.Usage.Add(res.Usage)
			_, err2 = tx.PutRun(r)
			return err2
		}
		r.Usage = r.Usage.Add(res.Usage)
		r.Ended = rn.e.clock.Now()
		t, err2 := tx.Thread(job.Thread.ID)
		if err2 != nil {
			return err2
		}
		itemStatus := ItemDone
		if err == nil && res.Pause != nil {
			return rn.e.questions.pauseTx(tx, job, &r, &t, res)
		}
		if err == nil {
			r.Status = RunCompleted
			if strings.TrimSpace(res.Reply) != "" {
				spec := botReply(job, res.Reply)
				spec.streamed = unused
				p, err2 := rn.e.router.postTx(tx, &t, spec)
				if err2 != nil {
					return err2
				}
				woken = append(woken, p.woken...)
			}
			rn.e.activity(tx, Activity{Event: "run.completed", Summary: fmt.Sprintf("@%s completed run %d", job.Bot.Handle, r.ID), Thread: t.ID, Actor: r.Bot, Run: r.ID})
			if reflect, err2 = rn.queueReflectionTx(tx, job, r, env.transcript(r), res.Reply); err2 != nil {
				return err2
			}
		} else {
			r.Status, r.Error, itemStatus = RunFailed, Redact(err.Error()), ItemFailed
			notice := systemNotice(r.ID, fmt.Sprintf("@%s could not finish: %s", job.Bot.Handle, rn.failureCause(err)))
			if _, err2 := rn.e.router.postTx(tx, &t, postSpec{msg: notice}); err2 != nil {
				return err2
			}
			rn.e.activity(tx, Activity{Event: "run.failed", Level: "error", Summary: notice.Text, Thread: t.ID, Actor: r.Bot, Run: r.ID})
			if job.Restart {
				// Whether an approved call ran before the restart is not known.
				if err2 := rn.e.questions.interruptedApprovalTx(tx, r); err2 != nil {
					return err2
				}
			} else if err2 := rn.e.questions.unrunApprovalTx(tx, job, rn.failureCause(err)); err2 != nil {
				return err2
			}
		}
		r.Checkpoint = nil // terminal runs keep no transcript (seed G5)
		if _, err2 := tx.PutRun(r); err2 != nil {
			return err2
		}
		if err2 := statusEventTx(tx, r.ID, rn.e.clock.Now(), map[string]any{"status": r.Status, "error": r.Error, "usage": r.Usage}); err2 != nil {
			return err2
		}
		for _, id := range r.Items {
			it, err2 := tx.Item(id)
			if err2 != nil {
				return err2
			}
			if it.Status != ItemProcessing {
				continue // cancelled meanwhile: keep it
			}
			it.Status = itemStatus
			if _, err2 := tx.PutItem(it); err2 != nil {
				return err2
			}
		}
		rel, err2 := rn.e.router.releaseHoldsTx(tx, r.Bot, r.Thread)
		woken = append(woken, rel...)
		return err2
	})
	if serr == nil && last != nil {
		last.announce(lastW)
	}
	if serr != nil {
		rn.e.log.Error("settling run failed", "run", job.Run.ID, "bot", job.Bot.Handle, "err", serr)
		unused = streamed
		lastAlone(sctx)
	} else if lost {
		rn.e.log.Warn("run's claim lapsed and another process took it over; its result here is dropped", "run", job.Run.ID, "bot", job.Bot.Handle)
		unused = nil // the run's streamed messages are the new owner's to edit or remove
	} else if reflect {
		rn.reflections.Notify()
	}
	rn.observeRunEnd(job, start, res, err, serr, cancelled)
	env.stream.discard(sctx, unused)
	work.end(sctx)
	if cancelled {
		rn.e.log.Info("run cancelled", "run", job.Run.ID, "bot", job.Bot.Handle)
	} else if err != nil {
		rn.e.log.Warn("run failed", "run", job.Run.ID, "bot", job.Bot.Handle, "err", Redact(err.Error()))
	}
	rn.e.nudge(woken)
}

// botReply builds the postSpec of a bot's message in a run: hop is one more than
// the highest trigger's (seed §4.3); it answers the last trigger on each platform.
func botReply(job *Job, text string) postSpec {
	hop := 0
	replyTo := map[ConversationRef]string{}
	for _, m := range job.Triggers {
		if m.Hop > hop {
			hop = m.Hop
		}
		if m.Origin != nil && m.Origin.PlatformID != "" {
			replyTo[m.Origin.Conversation] = m.Origin.PlatformID
		}
	}
	// A hand-off's trigger is a bot's message with no platform origin: answer the
	// person's message that started the work in that conversation instead.
	for conv, id := range job.startedBy {
		if _, ok := replyTo[conv]; !ok {
			replyTo[conv] = id
		}
	}
	return postSpec{
		msg: Message{Sender: job.Bot.ID(), SenderName: displayName(job.Bot), Text: text,
			Hop: hop + 1, Run: job.Run.ID},
		replyTo: replyTo,
	}
}

// failureCause is the short, user-facing cause of a failed run: an error's own
// words when it is a PeopleError, never credentials or internal addresses (ForPeople).
func (rn *runner) failureCause(err error) string {
	var n PeopleError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the run took longer than its time limit of %s (limits.run_timeout).", rn.e.cfg().limits.RunTimeout)
	case errors.Is(err, context.Canceled):
		return "the run was stopped because openbot is shutting down."
	case errors.As(err, &n):
		return ForPeople(n.Notice())
	}
	s := ForPeople(err.Error())
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}

// runCancels maps the runs executing in this process to the cancel functions
// of their contexts, so CancelRun can interrupt the model call or tool in flight.
type runCancels struct {
	mu    sync.Mutex
	m     map[RunID]context.CancelCauseFunc
	until map[RunID]time.Time // shared: when each run's claim lapses, as last stored
}

// errCancelled is the cause of a run context cancelled by CancelRun.
var errCancelled = errors.New("run cancelled by an operator")

// add registers the execution of run id, interrupted by f, until remove. A run
// executes at most once at a time in a process: its thread is busy for its bot
// until execute returns (worker.run).
func (c *runCancels) add(id RunID, f context.CancelCauseFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[RunID]context.CancelCauseFunc{}
	}
	c.m[id] = f
}

func (c *runCancels) remove(id RunID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
	delete(c.until, id)
}

// setClaimUntil records when run id's claim lapses (shared mode).
func (c *runCancels) setClaimUntil(id RunID, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok {
		return
	}
	if c.until == nil {
		c.until = map[RunID]time.Time{}
	}
	c.until[id] = t
}

// claimUntil returns when run id's claim lapses, if known.
func (c *runCancels) claimUntil(id RunID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.until[id]
	return t, ok
}

// ids returns the runs executing in this process.
func (c *runCancels) ids() []RunID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]RunID, 0, len(c.m))
	for id := range c.m {
		out = append(out, id)
	}
	return out
}

// has reports whether run id executes in this process.
func (c *runCancels) has(id RunID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[id]
	return ok
}

// cancelWith interrupts run id with cause, if it executes here.
func (c *runCancels) cancelWith(id RunID, cause error) {
	c.mu.Lock()
	f := c.m[id]
	c.mu.Unlock()
	if f != nil {
		f(cause)
	}
}

func (c *runCancels) cancel(id RunID) {
	c.mu.Lock()
	f := c.m[id]
	c.mu.Unlock()
	if f != nil {
		f(errCancelled)
	}
}

// cancelIfSettled cancels a run's context when the stored run is already
// cancelled: CancelRun committed after pick but before execute registered it.
func (c *runCancels) cancelIfSettled(ctx context.Context, s Store, id RunID, f context.CancelCauseFunc) {
	var st RunStatus
	if s.View(ctx, func(tx ReadTx) error {
		r, err := tx.Run(id)
		st = r.Status
		return err
	}) == nil && st == RunCancelled {
		f(errCancelled)
	}
}
