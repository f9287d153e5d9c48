package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// checkpointWatch counts the runs put with a checkpoint (by any write) and
// refuses, when refuse is set, to put a run whose checkpoint is refuse; refused
// is closed at the first refusal.
type checkpointWatch struct {
	core.Store
	n       atomic.Int32
	refuse  string
	refused chan struct{}
	once    sync.Once
}

type checkpointWatchTx struct {
	core.Tx
	w   *checkpointWatch
	put *bool
}

func (t checkpointWatchTx) PutRun(r core.Run) (core.Run, error) {
	if len(r.Checkpoint) > 0 {
		if t.w.refuse != "" && string(r.Checkpoint) == t.w.refuse {
			t.w.once.Do(func() { close(t.w.refused) })
			return r, errors.New("disk full")
		}
		*t.put = true
	}
	return t.Tx.PutRun(r)
}

func (w *checkpointWatch) counted(err error, put bool) error {
	if err == nil && put {
		w.n.Add(1)
	}
	return err
}

func (w *checkpointWatch) Update(ctx context.Context, fn func(core.Tx) error) error {
	put := false
	err := w.Store.Update(ctx, func(tx core.Tx) error { put = false; return fn(checkpointWatchTx{tx, w, &put}) })
	return w.counted(err, put)
}

func (w *checkpointWatch) Batch(ctx context.Context, fn func(core.Tx) error) error {
	put := false
	err := w.Store.Batch(ctx, func(tx core.Tx) error { put = false; return fn(checkpointWatchTx{tx, w, &put}) })
	return w.counted(err, put)
}

// heldRig is a harness on a standing fake clock with a streaming adapter and a
// checkpointWatch around the store.
func heldRig(t *testing.T) (*harness, *fakeClock, *streamAdapter, *checkpointWatch) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	w := &checkpointWatch{refused: make(chan struct{})}
	h.opts = func(o *core.Options) {
		o.Clock = clock
		w.Store = o.Store
		o.Store = w
	}
	return h, clock, newStreamAdapter(h.ad), w
}

// firstPostCheckpoint makes sa read, at its first Stream call, the stored
// checkpoint of the run *run names (set before the run streams); the returned
// function gives what it read.
func firstPostCheckpoint(h *harness, sa *streamAdapter, run *core.RunID) func() (string, error) {
	var (
		cp   string
		err  error
		once sync.Once
	)
	sa.before = func(core.StreamDelivery) {
		once.Do(func() { cp, err = h.runCheckpoint(*run) })
	}
	return func() (string, error) { return cp, err }
}

// runCheckpoint reads run id's stored checkpoint.
func (h *harness) runCheckpoint(id core.RunID) (string, error) {
	var cp string
	err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		r, err := tx.Run(id)
		cp = string(r.Checkpoint)
		return err
	})
	return cp, err
}

// TestHeldCheckpointNotStoredWhenAnsweredBeforeFirstPost: a run that holds its
// first checkpoint (core.CheckpointHolder) and finishes its answer within one
// stream interval shows nothing before its reply, which is posted once with no
// streamed message to edit, and never stores the held checkpoint.
func TestHeldCheckpointNotStoredWhenAnsweredBeforeFirstPost(t *testing.T) {
	h, _, sa, w := heldRig(t)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(`{"first":true}`))
		ts := job.Env.(core.TextStreamer)
		ts.StreamText("Hel")
		ts.StreamText("Hello")
		return "Hello.", nil
	}
	saysHelloOnce(t, h, sa, "the answer was done within the first interval")
	if n := w.n.Load(); n != 0 {
		t.Fatalf("%d writes stored a checkpoint, want none: the held one was never needed", n)
	}
}

// checkpointAtFirstPost runs one message whose run holds the first checkpoint
// held, then calls before (nil: none), then streams and is still writing at its
// first post; it returns the harness and stream adapter, and the run's stored
// checkpoint as read at that first post.
func checkpointAtFirstPost(t *testing.T, held string, before func(context.Context, *core.Job) error) (*harness, *streamAdapter, string, error) {
	h, clock, sa, _ := heldRig(t)
	var run core.RunID
	atPost := firstPostCheckpoint(h, sa, &run)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		run = job.Run.ID
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(held))
		if before != nil {
			if err := before(ctx, job); err != nil {
				return "", err
			}
		}
		job.Env.(core.TextStreamer).StreamText("Hel")
		if err := sa.firstPost(ctx, clock, "Hel"); err != nil {
			return "", err
		}
		return "Hello.", nil
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	cp, err := atPost()
	return h, sa, cp, err
}

// TestHeldCheckpointStoredBeforeFirstPost: a run still writing one interval
// after its text began is shown, and its held first checkpoint is stored
// before that first post.
func TestHeldCheckpointStoredBeforeFirstPost(t *testing.T) {
	const held = `{"first":true}`
	h, sa, cp, err := checkpointAtFirstPost(t, held, nil)
	if err != nil || cp != held {
		t.Fatalf("checkpoint at the first post = %q, %v; want the held one stored", cp, err)
	}
	if calls := sa.streamCalls(); len(calls) != 1 {
		t.Fatalf("stream calls = %+v, want the first post only", calls)
	}
	if ds := h.ad.deliveries(); len(ds) != 1 || len(ds[0].Streamed) != 1 {
		t.Fatalf("deliveries = %+v, want the reply to edit the streamed message", ds)
	}
}

// TestHeldCheckpointNeverReplacesStepCheckpoint: once a step's checkpoint is
// stored, the first post stores nothing over it.
func TestHeldCheckpointNeverReplacesStepCheckpoint(t *testing.T) {
	const step = `{"step":1}`
	_, _, cp, err := checkpointAtFirstPost(t, `{"first":true}`, func(ctx context.Context, job *core.Job) error {
		return job.Env.(core.StepRecorder).RecordStep(ctx, core.Step{Checkpoint: json.RawMessage(step)})
	})
	if err != nil || cp != step {
		t.Fatalf("checkpoint at the first post = %q, %v; want the step's, %s", cp, err, step)
	}
}

// TestHeldCheckpointRefusedShowsNothing: when the held first checkpoint cannot
// be stored, nothing is streamed; the run still answers.
func TestHeldCheckpointRefusedShowsNothing(t *testing.T) {
	h, clock, sa, w := heldRig(t)
	w.refuse = `{"first":true}`
	var looked atomic.Uint64 // the seq of the text the stream's last pass looked at
	pass := make(chan struct{}, 1)
	core.OnStreamPass(func(seq uint64) {
		looked.Store(seq)
		select {
		case pass <- struct{}{}:
		default:
		}
	})
	t.Cleanup(func() { core.OnStreamPass(nil) })
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(w.refuse))
		job.Env.(core.TextStreamer).StreamText("Hel")
		if err := advanceUntilClosed(ctx, clock, w.refused); err != nil {
			return "", err
		}
		clock.advance(time.Minute) // the next text is due at once
		job.Env.(core.TextStreamer).StreamText("Hello")
		for looked.Load() < 2 { // a pass looked at "Hello": a stream still on posted it then
			select {
			case <-pass:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "Hello.", nil
	}
	saysHelloOnce(t, h, sa, "after the first checkpoint was refused")
}

// saysHelloOnce runs one "hi" through h with stream adapter sa and checks that
// nothing was streamed (why says why none should be) and the reply "Hello." was
// posted once.
func saysHelloOnce(t *testing.T, h *harness, sa *streamAdapter, why string) {
	t.Helper()
	h.start2(sa)
	h.say("hi")
	h.idle()
	if calls := sa.streamCalls(); len(calls) != 0 {
		t.Fatalf("stream calls = %+v, want none: %s", calls, why)
	}
	if ds := h.ad.deliveries(); len(ds) != 1 || ds[0].Text != "Hello." || len(ds[0].Streamed) != 0 {
		t.Fatalf("deliveries = %+v, want the reply posted once", ds)
	}
}

// holdThenStopAgent holds a first checkpoint and waits for its run to be
// stopped, as an agent whose first model call shutdown interrupts.
type holdThenStopAgent struct{ started chan struct{} }

func (a holdThenStopAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	job.Env.(core.CheckpointHolder).HoldCheckpoint(json.RawMessage(`{"first":true}`))
	close(a.started)
	<-ctx.Done()
	return core.Result{}, ctx.Err()
}

// TestHeldCheckpointStoredAtShutdown: a run that shutdown stops while its first
// checkpoint is only held stays running with that checkpoint, so the next start
// resumes it instead of counting a restart before its first step.
func TestHeldCheckpointStoredAtShutdown(t *testing.T) {
	h := newHarness(t, core.Limits{})
	a := holdThenStopAgent{started: make(chan struct{})}
	h.stopMidRun(a, a.started)
	rs := h.runs(core.RunRunning)
	if len(rs) != 1 || string(rs[0].Checkpoint) != `{"first":true}` || rs[0].Restarts != 0 {
		t.Fatalf("running runs after shutdown = %+v, want one with the held checkpoint", rs)
	}
}

// advanceUntilClosed moves clock on by a second every 20 ms until ch is closed
// or ctx ends (then its error).
func advanceUntilClosed(ctx context.Context, clock *fakeClock, ch <-chan struct{}) error {
	for {
		clock.advance(time.Second)
		select {
		case <-ch:
			return nil
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
