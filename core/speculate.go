package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Speculative ingest (DESIGN.md §7, event -> model request). An ingest's
// transaction waits for the commit in flight, which on a slow disk takes
// several milliseconds, and only then starts its run (core/pickingest.go). To
// start the run at once, Ingest first runs the same ingest and pick on a read
// transaction, through an overlay that keeps their writes in memory
// (core/overlay.go) and takes the IDs of the records they insert from the
// store's reservations (IDReserver). When that pick starts a run of the
// message's first woken bot in the message's thread, the run is started right
// away, as a run started inside the ingest's transaction is: gated on the
// ingest's commit (core/ingestgate.go), with the thread's snapshot.
//
// The write transaction then does the ingest for real, inserting the records
// with the reserved IDs, and makes that bot's pick with the speculative run's
// thread counted as free. When it arrives at the same run (the same job and
// the same snapshot), it adopts the speculative run: nothing else starts, and
// the run's gate opens with the commit. Otherwise (the state changed in
// between: an older item, another message of the thread, the bot paused, a
// question answered) the speculative run is abandoned without a trace and
// the transaction rolls back and runs again as an ordinary ingest. So the run
// that proceeds is always the one the transaction would have started; what a
// miss costs is one model request at most, as a rerun's early run does.
//
// Only a single process on a store that reserves IDs speculates (shared
// stores start runs after their commit, core/shared.go), and only for messages
// without attachments (their downloads gate the run, core/files.go).

// errSpeculationMissed abandons a speculative run its ingest's transaction did
// not adopt.
var errSpeculationMissed = errors.New("core: the ingest's transaction did not start the run its speculation started")

// speculation is a run started from a read transaction before its ingest's
// write transaction.
type speculation struct {
	w   *worker
	job *Job // job.ingested and job.snapshot are set; the run owns the rest
	// The job as picked, for the transaction to compare its own pick with:
	// the run may change its Job from the moment it starts.
	enc       []byte
	startedBy map[ConversationRef]string
	snap      *threadSnapshot
	handle    string
	thread    ThreadID
	ov        *overlay  // the reservations
	now       time.Time // the ingest's clock reading, which the transaction uses too
	key       string    // the message's dedup key, claimed (specState.claim)
	// missed is set once the transaction did not adopt the run: later runs of
	// the ingest's function (Batch may run it again) ingest without it.
	missed bool
}

// specState is the engine's speculations: counts by outcome
// (Engine.Speculations), and the dedup keys of the messages with a live one.
type specState struct {
	started, adopted, missed atomic.Int64
	mu                       sync.Mutex
	keys                     map[string]chan struct{} // at most one per Ingest in flight; closed by unclaim
}

// maxSpeculations bounds the ingests speculating at once. A speculation costs
// the ingest and the pick a second time; that buys a run started before the
// commit in flight when messages come one at a time, and nothing when many
// wait for the writer together (they share its next commit, and the CPU is
// what bounds them). At 100 msg/s about one is in flight.
const maxSpeculations = 4

// claim reserves speculating on the message with dedup key k, which nothing
// else may do until unclaim: the same event delivered twice at once (two
// accounts of one conversation, a platform's retry) starts one run, not two
// of which one is abandoned. When k is claimed already it returns false and a
// channel closed at its unclaim; when maxSpeculations are claimed, false and
// nil.
func (s *specState) claim(k string) (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.keys[k]; ok {
		return false, ch
	}
	if len(s.keys) >= maxSpeculations {
		return false, nil
	}
	if s.keys == nil {
		s.keys = map[string]chan struct{}{}
	}
	s.keys[k] = make(chan struct{})
	return true, nil
}

func (s *specState) unclaim(k string) {
	s.mu.Lock()
	if ch, ok := s.keys[k]; ok {
		close(ch)
		delete(s.keys, k)
	}
	s.mu.Unlock()
}

// Speculations reports how many runs ingests started before their write
// transaction (speculative ingest, DESIGN.md §7), how many of those the
// transaction adopted, and how many it abandoned, since the engine was made.
func (e *Engine) Speculations() (started, adopted, missed int64) {
	return e.spec.started.Load(), e.spec.adopted.Load(), e.spec.missed.Load()
}

// speculate runs in's ingest and its first woken bot's pick on a read
// transaction and starts the run that pick makes, when it is of in's thread
// and in is among its triggers. It returns nil when it started nothing.
func (e *Engine) speculate(ctx context.Context, in Inbound) *speculation {
	res, ok := e.store.(IDReserver)
	if !ok || e.shared || len(in.Attachments) > 0 {
		return nil
	}
	if claimed, done := e.spec.claim(in.DedupKey); !claimed {
		if done == nil {
			return nil // enough speculations in flight: this one waits for the writer
		}
		// The same event is being ingested with a speculation: this delivery
		// waits for that ingest, so that its transaction finds the message
		// stored (a duplicate) rather than storing it first, which would start
		// a second run and abandon the speculative one.
		select {
		case <-done:
		case <-ctx.Done():
		}
		return nil
	}
	now := e.clock.Now()
	var (
		ov  *overlay
		w   *worker
		job *Job
	)
	err := e.store.View(ctx, func(rtx ReadTx) (err error) {
		defer func() {
			if p := recover(); p != nil { // a bug here must not fail the ingest, which works without
				err = fmt.Errorf("core: speculation panicked: %v", p)
			}
		}()
		ov = newOverlay(rtx, res)
		r, err := e.ingestTx(ov, in, now)
		if err != nil || r.Duplicate || r.Dropped || len(r.Woken) == 0 {
			return err
		}
		w = e.worker(r.Woken[0])
		bot, ok := e.bot(r.Woken[0])
		if w == nil || !ok || !w.pickMu.TryLock() {
			return nil
		}
		defer w.pickMu.Unlock()
		if job, err = e.pickIdleTx(ov, w, bot, now); err != nil || job == nil {
			return err
		}
		if job.Thread.ID == r.Thread && slices.Contains(job.Run.Triggers, r.Message) {
			if job.snapshot, err = readSnapshot(ov, job.Thread.ID); err == nil {
				return nil
			}
		}
		// An older item of another thread comes first, or no snapshot: the
		// transaction decides.
		w.giveBack(job)
		job = nil
		return err
	})
	if err != nil {
		e.log.Debug("no speculative run", "err", err)
		if job != nil {
			w.giveBack(job)
			job = nil
		}
	}
	if job == nil {
		if ov != nil {
			ov.release()
		}
		e.spec.unclaim(in.DedupKey)
		return nil
	}
	job.ingested = newIngestGate()
	s := &speculation{w: w, job: job, ov: ov, now: now, key: in.DedupKey, enc: jobBytes(job), startedBy: maps.Clone(job.startedBy),
		snap: job.snapshot, handle: job.Bot.Handle, thread: job.Thread.ID}
	if !w.run(job) {
		w.giveBack(job)
		ov.release()
		e.spec.unclaim(in.DedupKey)
		return nil
	}
	e.spec.started.Add(1)
	return s
}

// giveBack returns the worker state a pick of job took that no run holds: its
// thread's busy mark and its global slot, and wakes the worker to look again.
func (w *worker) giveBack(job *Job) {
	w.setBusy(job.Thread.ID, false)
	w.e.sem.release()
	w.wakeUp()
}

// live reports whether the ingest's transaction still ingests with s.
func (s *speculation) live() bool { return s != nil && !s.missed }

// miss abandons s's run: the transaction did not start it.
func (s *speculation) miss(e *Engine) {
	if !s.missed {
		s.missed = true
		e.spec.missed.Add(1)
	}
	s.job.ingested.resolve(errSpeculationMissed)
}

// end is called once the ingest's Batch has returned with err and its picks
// are settled: a run still waiting for its gate was not adopted, and the
// reservations end.
func (s *speculation) end(e *Engine, err error) {
	if s == nil {
		return
	}
	switch {
	case err == nil && !s.missed:
		e.spec.adopted.Add(1)
	case !s.missed: // the ingest failed: its run is abandoned with it
		s.missed = true
		e.spec.missed.Add(1)
	}
	s.job.ingested.resolve(errors.Join(errSpeculationMissed, err)) // no-op once settled
	s.ov.release()
	e.spec.unclaim(s.key)
}

// adoptTx, in the ingest's write transaction tx after ingestTx returned res,
// makes the pick of the speculation's bot with its run's thread counted as
// free, and reports whether it is the speculative run: the same job from the
// same snapshot. On a miss it abandons the run and returns errSpeculationMissed,
// which rolls the transaction back (the pick has written another run).
func (e *Engine) adoptTx(tx Tx, s *speculation, res IngestResult) error {
	bot, ok := e.bot(s.handle)
	if !ok || res.Duplicate || res.Dropped || len(res.Woken) == 0 || res.Woken[0] != bot.Handle {
		s.miss(e)
		return errSpeculationMissed
	}
	_, busy := s.w.inFlight()
	others := func(t ThreadID) bool { return t != s.thread && busy(t) }
	job, err := e.pickTx(tx, bot, others, s.now)
	if err != nil {
		return err
	}
	if job == nil || !bytes.Equal(jobBytes(job), s.enc) || !maps.Equal(job.startedBy, s.startedBy) {
		s.miss(e)
		return errSpeculationMissed
	}
	snap, err := readSnapshot(tx, job.Thread.ID)
	if err != nil {
		return err
	}
	if !sameSnapshot(snap, s.snap) {
		s.miss(e)
		return errSpeculationMissed
	}
	return nil
}

// jobBytes encodes the fields of a picked job the agent reads, as the store
// encodes records, so two picks of the same job compare equal (with startedBy).
func jobBytes(j *Job) []byte {
	c := *j
	c.Env, c.observer, c.ingested, c.snapshot, c.startedBy = nil, nil, nil, nil, nil
	return keep(c)
}

// sameSnapshot reports whether two snapshots of a thread hold the same messages.
func sameSnapshot(a, b *threadSnapshot) bool {
	return a.count == b.count && slices.EqualFunc(a.newest, b.newest, func(x, y Message) bool {
		return bytes.Equal(keep(x), keep(y))
	})
}

// reservedTx is the ingest's write transaction when it ingests with a
// speculation: the records it inserts take the IDs the speculation reserved,
// kind by kind in the order the speculation's inserts took them.
type reservedTx struct {
	Tx
	ids map[IDKind][]uint64
}

func (s *speculation) reserved(tx Tx) *reservedTx {
	ids := make(map[IDKind][]uint64, len(s.ov.reserved))
	for k, v := range s.ov.reserved {
		ids[k] = slices.Clone(v)
	}
	return &reservedTx{Tx: tx, ids: ids}
}

// fillID gives *id the next ID the speculation reserved of kind, when it is 0
// and one is left.
func fillID[T ~uint64](r *reservedTx, kind IDKind, id *T) {
	if v := r.ids[kind]; *id == 0 && len(v) > 0 {
		*id, r.ids[kind] = T(v[0]), v[1:]
	}
}

func (r *reservedTx) PutThread(t Thread) (Thread, error) {
	fillID(r, IDThread, &t.ID)
	return r.Tx.PutThread(t)
}

func (r *reservedTx) PutMessage(m Message) (Message, error) {
	fillID(r, IDMessage, &m.ID)
	return r.Tx.PutMessage(m)
}

func (r *reservedTx) PutItem(it InboxItem) (InboxItem, error) {
	fillID(r, IDItem, &it.ID)
	return r.Tx.PutItem(it)
}

func (r *reservedTx) PutRun(run Run) (Run, error) {
	fillID(r, IDRun, &run.ID)
	return r.Tx.PutRun(run)
}
