package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// scheduler is the engine's part for mailboxes and the scheduler (seed §5): one
// worker per bot picks from the bot's mailbox and starts runs under the global
// run slots. It owns the workers, the slots and the pick (pickTx: parking,
// busy threads, coalescing; a resume or restart item continues its run).
type scheduler struct {
	e   *Engine
	sem *slots // global run slots (Limits.MaxConcurrentRuns)

	mu      sync.Mutex
	workers map[string]*worker // by bot handle; made by start
	// start starts a bot's worker under Run's supervision; set while Run
	// takes work (startWorkers), nil before and once stopping.
	start func(handle string)
	// running counts the workers started; each returns when intake stops, after
	// its runs ended.
	running sync.WaitGroup
}

func newScheduler(e *Engine, maxRuns int) *scheduler {
	return &scheduler{e: e, sem: newSlots(maxRuns), workers: map[string]*worker{}}
}

// startWorkers starts a worker for every configured bot; from then on
// startWorker starts one for a bot a reload adds, until stopWorkers. Workers
// pick while ctx (intake) lives; their runs are bounded by runCtx, which may
// outlive ctx by the shutdown grace.
func (s *scheduler) startWorkers(ctx, runCtx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = func(handle string) { // s.mu held
		if _, ok := s.workers[handle]; ok {
			return
		}
		w := &worker{s: s, handle: handle, wake: make(chan struct{}, 1), busy: map[ThreadID]bool{}}
		s.workers[handle] = w
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			w.loop(ctx, runCtx)
		}()
		w.wakeUp()
	}
	for _, b := range s.e.cfg().order {
		s.start(b.Handle)
	}
}

// startWorker starts bot handle's worker unless it has one, or workers do not
// start (before startWorkers, after stopWorkers).
func (s *scheduler) startWorker(handle string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start != nil {
		s.start(handle)
	}
}

// stopWorkers lets no more workers start (shutdown); the running ones return
// once intake's context is done and their runs ended (running).
func (s *scheduler) stopWorkers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = nil
}

// reloaded applies a new settings generation: a worker for each new bot, and
// every worker woken so a changed max_parallel_threads or a removed bot takes
// effect. The slots take the new max_concurrent_runs.
func (s *scheduler) reloaded(next *settings) {
	s.sem.resize(next.limits.MaxConcurrentRuns)
	for _, b := range next.order {
		s.startWorker(b.Handle) // no-op for a bot that has a worker
	}
	s.mu.Lock()
	var workers []*worker
	for _, w := range s.workers {
		workers = append(workers, w)
	}
	s.mu.Unlock()
	for _, w := range workers {
		w.wakeUp()
	}
}

// worker drains one bot's mailbox. It runs up to the bot's MaxParallelThreads runs
// at once, each in a different thread (seed §5, invariant 3, widened by DESIGN.md §6:
// at most one run per (bot, thread)); with the default of 1 it is the seed's
// one-thread-at-a-time worker. Every run also holds a global slot (scheduler.sem).
// A bot's worker is started by Run, or by Reload for a bot added later.
type worker struct {
	s      *scheduler
	handle string
	wake   chan struct{} // cap 1: a pending wake-up is never lost, never queued twice

	mu     sync.Mutex
	busy   map[ThreadID]bool // threads with a run of this bot in flight, until execute returns
	runCtx context.Context   // bounds this worker's runs; set by loop; guarded by mu
	closed bool              // loop returned: no run starts any more; guarded by mu
	runs   sync.WaitGroup    // runs in flight (worker.run); waited for by loop
}

// wake nudges a bot's worker after its mailbox changed, here and, shared, in
// the other processes (a hint; core/shared.go).
func (s *scheduler) wake(handle string) {
	s.wakeLocal(handle)
	s.e.cluster.hint("wake", handle)
}

// wakeLocal nudges this process's worker of a bot.
func (s *scheduler) wakeLocal(handle string) {
	if w := s.worker(handle); w != nil {
		w.wakeUp()
	}
}

// worker is this process's worker of the bot handle, nil when it has none.
func (s *scheduler) worker(handle string) *worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[handle]
}

func (w *worker) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// inFlight reports how many runs the worker has in flight and whether thread t is one
// of their threads.
func (w *worker) inFlight() (n int, busy func(ThreadID) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := make(map[ThreadID]bool, len(w.busy))
	for t := range w.busy {
		snap[t] = true
	}
	return len(snap), func(t ThreadID) bool { return snap[t] }
}

func (w *worker) setBusy(t ThreadID, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.busy[t] = true
	} else {
		delete(w.busy, t)
	}
}

// loop runs until ctx (intake) is done, then waits for its in-flight runs. runCtx
// bounds in-flight runs, which may outlive ctx by the shutdown grace.
func (w *worker) loop(ctx, runCtx context.Context) {
	w.mu.Lock()
	w.runCtx = runCtx
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.runs.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for ctx.Err() == nil {
			bot, ok := w.s.e.bot(w.handle)
			if !ok {
				break // removed by Reload: no new work unless it comes back
			}
			// A wake-up most often finds nothing to start (the worker's own after
			// each run ends): a read says so without a commit.
			n, busy := w.inFlight()
			if n >= bot.parallel() || !w.s.mayPick(ctx, bot, busy) {
				break // a finishing run or a new item wakes the worker
			}
			// Take the slot before picking (seed G3): a bot waiting for a slot owns
			// no run row. Free slots beyond the first are taken too (never waited
			// for), so one commit starts up to pickMax runs in different threads
			// instead of one commit per run.
			if !w.s.sem.acquire(ctx) {
				return
			}
			k := 1
			for k < min(bot.parallel()-n, pickMax) && w.s.sem.tryAcquire() {
				k++
			}
			jobs, err := w.s.pick(ctx, bot, busy, k)
			for range k - len(jobs) {
				w.s.sem.release()
			}
			for _, job := range jobs {
				w.setBusy(job.Thread.ID, true)
			}
			if err != nil {
				if ctx.Err() == nil {
					w.s.e.log.Error("pick failed", "bot", w.handle, "err", err)
				}
				break
			}
			if len(jobs) == 0 {
				break
			}
			for _, job := range jobs {
				w.run(job) // the loop has not returned: it starts
			}
			if len(jobs) < k {
				break // the mailbox has nothing more to start now
			}
		}
	}
}

// pickMax bounds the runs one pick starts in one transaction.
const pickMax = 32

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
		w.s.e.runner.execute(ctx, job)
		w.setBusy(job.Thread.ID, false)
		w.s.sem.release()
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
func (s *scheduler) mayPick(ctx context.Context, bot BotProfile, busy func(ThreadID) bool) bool {
	found := true
	err := s.e.store.View(ctx, func(tx ReadTx) error {
		busyAny, room, err := s.e.cluster.busyAcrossTx(tx, bot, busy)
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

// pick starts up to k runs of bot (k >= 1), each in a different thread, in one
// transaction: pickTx for each, a thread just picked counting as busy for the next.
// busy may be nil (no thread is busy).
//
// The transaction goes through Store.Batch (group commit, DESIGN.md §7), so a pick
// shares its commit with the ingests and settles in flight instead of waiting for a
// commit of its own. Batch may run fn more than once and keeps only the last run's
// writes: fn reads everything it decides on inside tx and resets jobs at its start,
// so a re-run picks afresh; busy is a snapshot that does not change between runs.
func (s *scheduler) pick(ctx context.Context, bot BotProfile, busy func(ThreadID) bool, k int) ([]*Job, error) {
	var jobs []*Job
	err := s.e.store.Batch(ctx, func(tx Tx) error {
		jobs = nil // Batch may run fn again: nothing from an earlier run survives
		taken := map[ThreadID]bool{}
		busyAny, room, err := s.e.cluster.busyAcrossTx(tx, bot, busy)
		if err != nil {
			return err
		}
		limit := min(k, room)
		busyOrTaken := func(t ThreadID) bool { return taken[t] || busyAny(t) }
		for len(jobs) < limit {
			job, err := s.pickTx(tx, bot, busyOrTaken)
			if err != nil {
				return err
			}
			if job == nil {
				break
			}
			jobs = append(jobs, job)
			taken[job.Thread.ID] = true
		}
		if len(jobs) == 0 {
			return nil
		}
		return lockBotTx(tx, bot.Handle, s.e.clock.Now()) // picks of one bot, and its pause, conflict
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// pickTx chooses the oldest queued item whose thread is not parked for this bot and
// not busy (a run of this bot is in flight there), coalesces every queued message
// item of that thread into one new run and marks them processing (seed §5,
// invariant 5). It returns nil when there is nothing to start.
func (s *scheduler) pickTx(tx Tx, bot BotProfile, busy func(ThreadID) bool) (*Job, error) {
	var job *Job
	err := func() error {
		if _, paused, err := PausedTx(tx, bot.Handle); err != nil || paused {
			return err // a paused bot starts nothing; ResumeBot wakes it (core/pause.go)
		}
		parked := map[ThreadID]bool{}
		waiting, err := tx.RunsByStatus(RunWaitingHuman)
		if err != nil {
			return err
		}
		for _, r := range waiting {
			if r.Bot == bot.ID() {
				parked[r.Thread] = true
			}
		}
		skip := func(it InboxItem) bool {
			return (busy != nil && busy(it.Thread)) || (it.Kind == ItemMessage && parked[it.Thread]) || s.e.files.pendingTx(tx, it)
		}
		first, err := tx.NextQueued(bot.ID(), skip)
		for err == nil && first.Kind == ItemQuestion {
			// Bots are never asked questions; such an item must not block the mailbox.
			first.Status = ItemCancelled
			if _, err := tx.PutItem(first); err != nil {
				return err
			}
			s.e.activity(tx, Activity{Event: "inbox.unsupported", Level: "warn", Summary: "question item for a bot cancelled", Thread: first.Thread, Actor: bot.ID(), Item: first.ID})
			first, err = tx.NextQueued(bot.ID(), skip)
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if first.Kind == ItemResume {
			job, err = s.pickResumeTx(tx, bot, first)
			return err
		}
		items, err := tx.QueuedInThread(bot.ID(), first.Thread)
		if err != nil {
			return err
		}
		now := s.e.clock.Now()
		run := Run{Bot: bot.ID(), Thread: first.Thread, Status: RunRunning, Created: now, Started: now}
		s.e.cluster.claimRun(&run, now)
		var triggers []Message
		for _, it := range items {
			if it.Kind != ItemMessage {
				continue
			}
			m, err := tx.Message(it.Message)
			if err != nil {
				return fmt.Errorf("item %d: message %d: %w", it.ID, it.Message, err)
			}
			if hasPending(m) {
				s.e.files.enqueue(m.ID)
				continue // its files are still downloading: a later run takes it
			}
			run.Items = append(run.Items, it.ID)
			run.Triggers = append(run.Triggers, it.Message)
			triggers = append(triggers, m)
		}
		if run, err = tx.PutRun(run); err != nil {
			return err
		}
		for _, it := range items {
			if it.Kind != ItemMessage || !slices.Contains(run.Items, it.ID) {
				continue
			}
			it.Status, it.Run = ItemProcessing, run.ID
			if _, err := tx.PutItem(it); err != nil {
				return err
			}
		}
		if err := statusEventTx(tx, run.ID, now, map[string]any{"status": RunRunning, "triggers": run.Triggers}); err != nil {
			return err
		}
		t, err := tx.Thread(first.Thread)
		if err != nil {
			return err
		}
		if job, err = s.newJobTx(tx, bot, run, t, triggers); err != nil {
			return err
		}
		s.e.activity(tx, Activity{Event: "run.started", Summary: fmt.Sprintf("@%s started run %d with %d trigger(s)", bot.Handle, run.ID, len(triggers)), Thread: t.ID, Actor: bot.ID(), Run: run.ID})
		return nil
	}()
	if err != nil {
		return nil, err
	}
	return job, nil
}

// newJobTx assembles a Job: roster, the thread's default bot, the scope decision
// (seed §6) and the participants with their names.
func (s *scheduler) newJobTx(tx ReadTx, bot BotProfile, run Run, t Thread, triggers []Message) (*Job, error) {
	set := s.e.cfg()
	pol, err := s.e.threadPolicyTx(tx, t)
	if err != nil {
		return nil, err
	}
	bot = pol.apply(bot) // the channel's tools and instructions (core/policy.go)
	job := &Job{Run: run, Bot: bot, Thread: t, Triggers: triggers, Roster: slices.Clone(set.order), DefaultBot: set.threadDefault(&t)}
	job.Scoped = job.DefaultBot != bot.Handle && len(set.botsIn(&t)) > 1
	if len(t.Bindings) > 0 && len(t.Bindings[0].Accounts) > 0 {
		acct := t.Bindings[0].Accounts[0]
		job.channel = channelBudget{acct: acct, channel: s.e.channelOf(acct, t.Bindings[0].Conversation), limit: pol.Budget}
	}
	startedBy, err := startedByTx(tx, t)
	if err != nil {
		return nil, err
	}
	job.startedBy = startedBy
	for _, p := range t.Participants {
		a, err := tx.Actor(p)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		job.Participants = append(job.Participants, a)
	}
	return job, nil
}

// pickResumeTx turns a resume item into a Job that continues its run under the
// same run id: a waiting run with its answered question (seed §7), or a run a
// restart interrupted (pickRestartTx). A stale item (the run was settled
// another way) is cancelled and nil returned.
func (s *scheduler) pickResumeTx(tx Tx, bot BotProfile, it InboxItem) (*Job, error) {
	run, err := tx.Run(it.Run)
	if err != nil {
		return nil, fmt.Errorf("resume item %d: %w", it.ID, err)
	}
	if run.Status == RunQueued && (len(run.Checkpoint) > 0 || run.Restarts > 0) {
		return s.pickRestartTx(tx, bot, it, run)
	}
	q, qerr := tx.Question(run.Question)
	if run.Status != RunWaitingHuman || qerr != nil || q.Status == QuestionPending {
		// Stale (the run was settled another way): drop the item, keep the mailbox moving.
		it.Status = ItemCancelled
		_, err := tx.PutItem(it)
		s.e.activity(tx, Activity{Event: "inbox.stale_resume", Level: "warn", Summary: fmt.Sprintf("resume of run %d (%s) cancelled", run.ID, run.Status), Thread: it.Thread, Actor: bot.ID(), Item: it.ID, Run: run.ID})
		return nil, err
	}
	run.Started = s.e.clock.Now()
	job, err := s.continueTx(tx, bot, it, run, map[string]any{"resumed_by": q.ID})
	if err != nil {
		return nil, err
	}
	job.Resume = &q
	s.e.activity(tx, Activity{Event: "run.resumed", Summary: fmt.Sprintf("@%s resumed run %d: %s", bot.Handle, run.ID, q.Decision()), Thread: job.Thread.ID, Actor: bot.ID(), Run: run.ID})
	return job, nil
}

// pickRestartTx turns the resume item of a run a restart interrupted (status
// queued, runner.queueRestartTx) into a Job under the same run id: with Restart
// set when the run has a step checkpoint, else a fresh start from the beginning
// with the run's triggers; Resume is the run's answered question, if any, for a
// call that waited for it.
func (s *scheduler) pickRestartTx(tx Tx, bot BotProfile, it InboxItem, run Run) (*Job, error) {
	job, err := s.continueTx(tx, bot, it, run, map[string]any{"restart": true})
	if err != nil {
		return nil, err
	}
	if len(run.Checkpoint) == 0 {
		// Nothing happened before the kill: the run starts from the beginning.
		s.e.activity(tx, Activity{Event: "run.restarted", Summary: fmt.Sprintf("@%s started run %d again from the beginning after a restart", bot.Handle, run.ID), Thread: job.Thread.ID, Actor: bot.ID(), Run: run.ID})
		return job, nil
	}
	job.Restart = true
	if run.Question != 0 {
		if q, err := tx.Question(run.Question); err == nil && q.Status != QuestionPending {
			job.Resume = &q
		}
	}
	s.e.activity(tx, Activity{Event: "run.resumed", Summary: fmt.Sprintf("@%s resumed run %d after a restart", bot.Handle, run.ID), Thread: job.Thread.ID, Actor: bot.ID(), Run: run.ID})
	return job, nil
}

// continueTx runs run again under its id for resume item it: the run becomes
// running and claimed, the item processing, a status event records why (why's
// fields beside the status), and the Job carries the run's triggers.
func (s *scheduler) continueTx(tx Tx, bot BotProfile, it InboxItem, run Run, why map[string]any) (*Job, error) {
	now := s.e.clock.Now()
	run.Status = RunRunning
	run.Items = append(run.Items, it.ID)
	s.e.cluster.claimRun(&run, now)
	run, err := tx.PutRun(run)
	if err != nil {
		return nil, err
	}
	it.Status = ItemProcessing
	if _, err := tx.PutItem(it); err != nil {
		return nil, err
	}
	why["status"] = RunRunning
	if err := statusEventTx(tx, run.ID, now, why); err != nil {
		return nil, err
	}
	t, err := tx.Thread(run.Thread)
	if err != nil {
		return nil, err
	}
	var triggers []Message
	for _, id := range run.Triggers {
		m, err := tx.Message(id)
		if err != nil {
			return nil, err
		}
		triggers = append(triggers, m)
	}
	return s.newJobTx(tx, bot, run, t, triggers)
}

// startedByLookback is how many recent messages newJobTx reads to find the human
// message that started the work in each conversation.
const startedByLookback = 50

// startedByTx maps each conversation of t to the platform id of its newest human
// message among the thread's last startedByLookback messages.
func startedByTx(tx ReadTx, t Thread) (map[ConversationRef]string, error) {
	ms, err := tx.MessagesBefore(t.ID, 0, startedByLookback)
	if err != nil {
		return nil, err
	}
	out := map[ConversationRef]string{}
	for _, m := range ms { // newest first
		if m.Origin == nil || m.Origin.PlatformID == "" {
			continue
		}
		if _, ok := out[m.Origin.Conversation]; !ok {
			out[m.Origin.Conversation] = m.Origin.PlatformID
		}
	}
	return out, nil
}
