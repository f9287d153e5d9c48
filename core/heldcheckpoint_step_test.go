package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// stallStore stalls the put of a run whose checkpoint is stall, inside its
// transaction, until the next write reaches the store (or release is called):
// a step's checkpoint still in flight. stalled is closed when it stalls.
type stallStore struct {
	core.Store
	stall   string
	stalled chan struct{}
	freed   chan struct{}
	once1   sync.Once
	once2   sync.Once
}

func newStallStore(stall string) *stallStore {
	return &stallStore{stall: stall, stalled: make(chan struct{}), freed: make(chan struct{})}
}

func (s *stallStore) release() { s.once2.Do(func() { close(s.freed) }) }

// another is called by every write: one that comes while the put stalls frees it.
func (s *stallStore) another() {
	select {
	case <-s.stalled:
		s.release()
	default:
	}
}

type stallTx struct {
	core.Tx
	s *stallStore
}

func (t stallTx) PutRun(r core.Run) (core.Run, error) {
	if string(r.Checkpoint) == t.s.stall {
		t.s.once1.Do(func() { close(t.s.stalled) })
		select {
		case <-t.s.freed:
		case <-time.After(10 * time.Second): // safety only: never hang the test
		}
	}
	return t.Tx.PutRun(r)
}

func (s *stallStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	s.another()
	return s.Store.Update(ctx, func(tx core.Tx) error { return fn(stallTx{tx, s}) })
}

func (s *stallStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	s.another()
	return s.Store.Batch(ctx, func(tx core.Tx) error { return fn(stallTx{tx, s}) })
}

// TestHeldCheckpointPostWaitsForStepInFlight: a step whose checkpoint is
// still being written does not let the stream's first post go ahead with no
// checkpoint stored: at that post the run has a checkpoint (the step's, or the
// held one it then supersedes), so a kill right after the post cannot restart
// from the beginning a run that was seen.
func TestHeldCheckpointPostWaitsForStepInFlight(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	const step = `{"step":1}`
	st := newStallStore(step)
	h.opts = func(o *core.Options) {
		o.Clock = clock
		st.Store = o.Store
		o.Store = st
	}
	sa := newStreamAdapter(h.ad)
	var run core.RunID
	atPost := firstPostCheckpoint(h, sa, &run)
	var stepErr error
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		run = job.Run.ID
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(`{"first":true}`))
		job.Env.(core.TextStreamer).StreamText("Hel")
		errc := make(chan error, 1)
		go func() {
			errc <- job.Env.(core.StepRecorder).RecordStep(ctx, core.Step{Checkpoint: json.RawMessage(step)})
		}()
		select {
		case <-st.stalled:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if err := sa.firstPost(ctx, clock, "Hel"); err != nil {
			return "", err
		}
		st.release()
		stepErr = <-errc
		return "Hello.", nil
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	if stepErr != nil {
		t.Fatalf("RecordStep: %v", stepErr)
	}
	if cp, err := atPost(); err != nil || cp == "" {
		t.Fatalf("checkpoint at the first post = %q, %v; want one stored before the run is seen", cp, err)
	}
}

// TestHeldCheckpointKeptWhenStepCheckpointNotStored: a step whose checkpoint
// is not stored (shutdown ended the run's context as its model call answered)
// does not take the held first checkpoint with it: shutdown stores the held
// one, so the next start resumes the run instead of counting a restart.
func TestHeldCheckpointKeptWhenStepCheckpointNotStored(t *testing.T) {
	h := newHarness(t, core.Limits{})
	started := make(chan struct{})
	stepErr := make(chan error, 1)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(`{"first":true}`))
		close(started)
		<-ctx.Done()
		stepErr <- job.Env.(core.StepRecorder).RecordStep(ctx, core.Step{Checkpoint: json.RawMessage(`{"step":1}`)})
		return "", ctx.Err()
	}
	h.start()
	h.say("hello")
	<-started
	h.stop()
	if err := <-stepErr; err == nil {
		t.Fatal("RecordStep stored a checkpoint after the run's context ended")
	}
	h.reopen()
	rs := h.runs(core.RunRunning)
	if len(rs) != 1 || string(rs[0].Checkpoint) != `{"first":true}` {
		t.Fatalf("running runs after shutdown = %+v, want one with the held checkpoint", rs)
	}
}

// refuseOnceStore refuses the first Batch or Update that puts a run whose
// checkpoint is refuse (each of its tries: a group's and the one alone).
type refuseOnceStore struct {
	core.Store
	refuse  string
	refused chan struct{}
	mu      sync.Mutex
	calls   int // Batch and Update calls that put refuse
}

type refuseOnceTx struct {
	core.Tx
	s *refuseOnceStore
}

func (t refuseOnceTx) PutRun(r core.Run) (core.Run, error) {
	if string(r.Checkpoint) == t.s.refuse {
		t.s.mu.Lock()
		defer t.s.mu.Unlock()
		if t.s.calls == 0 {
			return r, errors.New("disk full")
		}
	}
	return t.Tx.PutRun(r)
}

// counted runs a write and, once it failed having tried to put refuse, lets
// later writes put it.
func (s *refuseOnceStore) counted(write func(func(core.Tx) error) error, fn func(core.Tx) error) error {
	tried := false
	err := write(func(tx core.Tx) error {
		s.mu.Lock()
		first := s.calls == 0
		s.mu.Unlock()
		err := fn(refuseOnceTx{tx, s})
		if first && err != nil && err.Error() == "disk full" {
			tried = true
		}
		return err
	})
	if tried {
		s.mu.Lock()
		if s.calls == 0 {
			close(s.refused)
		}
		s.calls++
		s.mu.Unlock()
	}
	return err
}

func (s *refuseOnceStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	return s.counted(func(f func(core.Tx) error) error { return s.Store.Update(ctx, f) }, fn)
}

func (s *refuseOnceStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return s.counted(func(f func(core.Tx) error) error { return s.Store.Batch(ctx, f) }, fn)
}

// TestHeldCheckpointKeptWhenItsStoreFails: a held first checkpoint the stream
// could not store (nothing is shown) is still held: shutdown stores it.
func TestHeldCheckpointKeptWhenItsStoreFails(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	const held = `{"first":true}`
	st := &refuseOnceStore{refuse: held, refused: make(chan struct{})}
	h.opts = func(o *core.Options) {
		o.Clock = clock
		st.Store = o.Store
		o.Store = st
	}
	sa := newStreamAdapter(h.ad)
	started := make(chan struct{})
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(held))
		job.Env.(core.TextStreamer).StreamText("Hel")
		if err := advanceUntilClosed(ctx, clock, st.refused); err != nil {
			return "", err
		}
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}
	h.start2(sa)
	h.say("hello")
	<-started
	h.stop()
	h.reopen()
	rs := h.runs(core.RunRunning)
	if len(rs) != 1 || string(rs[0].Checkpoint) != held {
		t.Fatalf("running runs after shutdown = %+v, want one with the held checkpoint", rs)
	}
}
