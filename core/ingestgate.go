package core

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// A run an ingest starts begins before the ingest's commit has landed (DESIGN.md
// §7, event -> model request): its pick is made inside the ingest's transaction
// (core/pickingest.go), and its goroutine starts right there, so the agent builds
// its prompt and sends the model request while the commit is still being
// written. Nothing of the run can be seen or stored before that commit: every
// write of its RunEnv, its work indicator, its stream's first post
// (runEnv.storeHeld) and its settle wait for the ingest's ingestGate.
// The thread's messages the agent reads for the prompt come from a snapshot taken
// in the ingest's transaction (threadSnapshot), since no other reader sees that
// transaction's writes before its commit.
//
// When the commit fails, or Batch runs the ingest's function again (a neighbour in
// its group failed), the run is abandoned: its context is cancelled with
// errNotIngested, so its model request stops, and it ends without a trace (not
// settled, no notice: the message it answered was never stored and the caller of
// Ingest got the error). What such a run costs is one model request at most.
//
// Many processes sharing a store (core/shared.go) start no run this way: a claim
// is only real once committed there, and other processes' sweeps read it.

// errNotIngested cancels a run whose ingest did not commit.
var errNotIngested = errors.New("core: the message that started this run was not stored")

// ingestGate is the outcome of the ingest commit a run started in: open until
// Ingest resolves it once, with nil (committed) or the error.
type ingestGate struct {
	mu       sync.Mutex
	done     chan struct{}
	resolved bool // resolve was called; guarded by mu
	err      error
	then     []func(error)
}

func newIngestGate() *ingestGate { return &ingestGate{done: make(chan struct{})} }

// resolve records the commit's outcome and calls what whenResolved registered
// before the gate shows the outcome: a run that sees its ingest failed has
// already been stopped (its context cancelled), so nothing it does after a
// refused write starts a model call or a tool. Only the first call counts.
func (g *ingestGate) resolve(err error) {
	g.mu.Lock()
	if g.resolved {
		g.mu.Unlock()
		return
	}
	g.resolved, g.err = true, err
	fs := slices.Clone(g.then)
	g.then = nil
	g.mu.Unlock()
	for _, f := range fs {
		f(err)
	}
	close(g.done)
}

// whenResolved calls f with the commit's outcome (nil: committed) when the gate
// resolves, before it shows the outcome to wait, or at once when it already has.
func (g *ingestGate) whenResolved(f func(error)) {
	g.mu.Lock()
	if g.resolved {
		err := g.err
		g.mu.Unlock()
		f(err)
		return
	}
	g.then = append(g.then, f)
	g.mu.Unlock()
}

// wait blocks until the gate resolves or ctx ends. It returns nil when the ingest
// committed, an error wrapping errNotIngested when it did not, else ctx's error.
// A nil gate (a run not started by an ingest) is always open.
func (g *ingestGate) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.err != nil {
		return errors.Join(errNotIngested, g.err)
	}
	return nil
}

// open reports whether the gate has not resolved yet.
func (g *ingestGate) open() bool {
	if g == nil {
		return false
	}
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// failed reports whether the gate resolved with an error.
func (g *ingestGate) failed() bool {
	if g == nil || g.open() {
		return false
	}
	return g.err != nil
}

// snapshotMessages is how many of a thread's newest messages an ingest's pick
// reads for its run (threadSnapshot): the agent's first history page
// (agents/history.go), so a prompt usually needs nothing else before the commit.
const snapshotMessages = 50

// threadSnapshot is a thread as the ingest's transaction that started a run saw
// it: its message count and newest messages (newest first). While the ingest's
// commit is in flight the run's RunEnv answers reads of the thread from it, when
// it can; other reads wait for the commit.
type threadSnapshot struct {
	count  int
	newest []Message // newest first, at most snapshotMessages
}

// readSnapshot reads thread's snapshot in tx.
func readSnapshot(tx ReadTx, thread ThreadID) (*threadSnapshot, error) {
	n, err := tx.CountMessages(thread)
	if err != nil {
		return nil, err
	}
	ms, err := tx.MessagesBefore(thread, 0, snapshotMessages)
	if err != nil {
		return nil, err
	}
	return &threadSnapshot{count: n, newest: ms}, nil
}

// before answers MessagesBefore(before, limit) from the snapshot, newest first;
// ok is false when the answer may hold messages the snapshot lacks.
func (s *threadSnapshot) before(before MessageID, limit int) (out []Message, ok bool) {
	for _, m := range s.newest {
		if before != 0 && m.ID >= before {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, m)
	}
	// Past the snapshot's oldest message: complete only if that was the thread's first.
	return out, len(out) == limit || len(s.newest) == s.count
}

// errIngestRerun abandons the runs an ingest's function started when Batch runs
// the function again: the new run's picks replace them.
var errIngestRerun = errors.New("core: the ingest's transaction was run again")

// errIngestPanic abandons the runs an ingest's function started when Batch
// panicked (the function's own bug, raised again on the caller's goroutine): no
// commit will be decided for them, and they must not hold their threads and
// slots waiting for one.
var errIngestPanic = errors.New("core: the ingest's transaction panicked")

// ingestLanded waits for the commit of the ingest that started job, when it
// started one before its commit, and reports whether the run may be settled. A
// run whose ingest failed ends here without a trace. A slow commit is waited for
// as long as it takes (Batch always answers): the run's message was acknowledged,
// and a run given up here would stay running, unanswered, until the next start.
// Only during shutdown is the wait bounded, by the shutdown grace: a commit
// that outlasts it leaves the run as a shutdown leaves a run; if the commit
// lands, the run stays running and the next start recovers it (DESIGN.md §8).
func (e *Engine) ingestLanded(ctx context.Context, job *Job, env *runEnv, work *runWork) bool {
	g := job.ingested
	if g == nil {
		return true
	}
	var err error
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.grace)
		err = g.wait(wctx)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, errNotIngested) || e.isStopping() {
			break
		}
		e.log.Info("run waits for the commit of the message that started it", "run", job.Run.ID, "bot", job.Bot.Handle, "waited", e.grace)
	}
	env.stream.finish() // nothing was streamed: text waits for the first checkpoint
	work.abandon()
	if errors.Is(err, errNotIngested) {
		e.log.Debug("run abandoned: the message that started it was not stored", "run", job.Run.ID, "bot", job.Bot.Handle, "err", err)
	} else {
		e.log.Warn("run left running: the commit of the message that started it did not finish in time; the next start recovers it", "run", job.Run.ID, "bot", job.Bot.Handle)
	}
	return false
}
