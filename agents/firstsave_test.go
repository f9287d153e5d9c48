package agents

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// saveEnv is a streamEnv whose Checkpoint is decided by the test.
type saveEnv struct {
	*streamEnv
	save func(ctx context.Context, raw json.RawMessage) error
}

func (e *saveEnv) Checkpoint(ctx context.Context, raw json.RawMessage) error {
	if err := e.save(ctx, raw); err != nil {
		return err
	}
	return e.streamEnv.Checkpoint(ctx, raw)
}

var _ core.RunEnv = (*saveEnv)(nil)

// executeHi runs the engineer on "@engineer hi" added to fe, with env as its
// RunEnv, against srv.
func executeHi(t *testing.T, srv *openaitest.Server, fe *fakeEnv, env core.RunEnv) (core.Result, error) {
	t.Helper()
	trig := fe.add(alice, "Alice", "@engineer hi", "engineer")
	job := newJob(fe, engineer, false, trig)
	job.Env = env
	return execute(t, newAgent(t, srv, NewRegistry(), nil), job)
}

// holdEnv is a saveEnv that holds the first checkpoint (core.CheckpointHolder),
// as core's RunEnv does.
type holdEnv struct {
	*saveEnv
	mu   sync.Mutex
	held []json.RawMessage
}

func (e *holdEnv) HoldCheckpoint(raw json.RawMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.held = append(e.held, raw)
}

var _ core.CheckpointHolder = (*holdEnv)(nil)

// TestFirstCheckpointHeldByCore: with a RunEnv that holds it, a new run's first
// checkpoint is handed over once, before the first model request, and not
// stored by the agent: the request waits for no write.
func TestFirstCheckpointHeldByCore(t *testing.T) {
	srv := openaitest.New(t)
	env := &holdEnv{saveEnv: &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}}
	var stored atomic.Int32
	env.save = func(context.Context, json.RawMessage) error { stored.Add(1); return nil }
	var heldBeforeAsk bool
	storedBeforeAsk := int32(-1)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		env.mu.Lock()
		heldBeforeAsk = len(env.held) == 1
		env.mu.Unlock()
		storedBeforeAsk = stored.Load()
		return openaitest.Text("done here")
	})
	res, err := executeHi(t, srv, env.fakeEnv, env)
	if err != nil || res.Reply != "done here" {
		t.Fatalf("Execute = %q, %v", res.Reply, err)
	}
	if !heldBeforeAsk {
		t.Fatal("the first checkpoint was not held before the model request")
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	var v struct {
		Version int `json:"version"`
	}
	if len(env.held) != 1 || json.Unmarshal(env.held[0], &v) != nil || v.Version == 0 {
		t.Fatalf("held = %q, want one checkpoint", env.held)
	}
	if storedBeforeAsk != 0 {
		t.Fatalf("the agent stored %d checkpoints before the model request, want none", storedBeforeAsk)
	}
}

// TestFirstCheckpointStoredBeforeModelRequest: with a RunEnv that cannot hold
// it, the first checkpoint is stored before the first model request.
func TestFirstCheckpointStoredBeforeModelRequest(t *testing.T) {
	srv := openaitest.New(t)
	var asked atomic.Bool
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		asked.Store(true)
		return openaitest.Text("done here")
	})
	env := &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}
	var first sync.Once
	var err1 error
	env.save = func(context.Context, json.RawMessage) error {
		first.Do(func() {
			if asked.Load() {
				err1 = errors.New("the model was asked before the first checkpoint was stored")
			}
		})
		return nil
	}
	res, err := executeHi(t, srv, env.fakeEnv, env)
	if err != nil || res.Reply != "done here" {
		t.Fatalf("Execute = %q, %v", res.Reply, err)
	}
	if err1 != nil {
		t.Fatal(err1)
	}
}

// TestFirstCheckpointFailureStopsRun: a run whose first checkpoint cannot be
// stored does not go on: the model is not asked, nothing is streamed, and the
// error says why.
func TestFirstCheckpointFailureStopsRun(t *testing.T) {
	srv := openaitest.New(t)
	var asked atomic.Bool
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		asked.Store(true)
		return openaitest.Text("should not be seen")
	})
	env := &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}
	env.save = func(context.Context, json.RawMessage) error { return errors.New("disk full") }
	res, err := executeHi(t, srv, env.fakeEnv, env)
	if err == nil || !strings.Contains(err.Error(), "first checkpoint") || !strings.Contains(err.Error(), "disk full") || res.Reply != "" {
		t.Fatalf("Execute = %q, %v; want the first checkpoint's error", res.Reply, err)
	}
	if asked.Load() {
		t.Fatal("the model was asked after the first checkpoint failed")
	}
	env.smu.Lock()
	defer env.smu.Unlock()
	if len(env.shown) > 0 {
		t.Fatalf("streamed %q after the first checkpoint failed", env.shown)
	}
}
