package agents

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
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

// TestFirstCheckpointBesideModelRequest: a new run's first checkpoint is stored
// while its first model request is made (the request reaches the model before the
// store answers), and nothing of that call is streamed before it is stored.
func TestFirstCheckpointBesideModelRequest(t *testing.T) {
	srv := openaitest.New(t)
	asked := make(chan struct{})
	var once sync.Once
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		once.Do(func() { close(asked) })
		return openaitest.Text("done here")
	})
	env := &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}
	var first sync.Once
	env.save = func(ctx context.Context, _ json.RawMessage) error {
		var err error
		first.Do(func() {
			select {
			case <-asked: // the model request was made while this is stored
			case <-ctx.Done():
				err = errors.New("the model request waited for the first checkpoint")
			}
			env.smu.Lock()
			if len(env.shown) > 0 {
				err = errors.New("text streamed before the first checkpoint was stored")
			}
			env.smu.Unlock()
		})
		return err
	}
	trig := env.add(alice, "Alice", "@engineer hi", "engineer")
	job := newJob(env.fakeEnv, engineer, false, trig)
	job.Env = env
	a := newAgent(t, srv, NewRegistry(), func(o *Options) { o.Limits.RunTimeout = 5e9 })
	res, err := execute(t, a, job)
	if err != nil || res.Reply != "done here" {
		t.Fatalf("Execute = %q, %v", res.Reply, err)
	}
}

// TestFirstCheckpointFailureStopsRun: a run whose first checkpoint cannot be
// stored does not go on: its model call's answer is neither streamed nor
// returned, and the error says why.
func TestFirstCheckpointFailureStopsRun(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("should not be seen"))
	env := &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}
	env.save = func(context.Context, json.RawMessage) error { return errors.New("disk full") }
	trig := env.add(alice, "Alice", "@engineer hi", "engineer")
	job := newJob(env.fakeEnv, engineer, false, trig)
	job.Env = env
	res, err := execute(t, newAgent(t, srv, NewRegistry(), nil), job)
	if err == nil || !strings.Contains(err.Error(), "first checkpoint") || !strings.Contains(err.Error(), "disk full") || res.Reply != "" {
		t.Fatalf("Execute = %q, %v; want the first checkpoint's error", res.Reply, err)
	}
	env.smu.Lock()
	defer env.smu.Unlock()
	if len(env.shown) > 0 {
		t.Fatalf("streamed %q after the first checkpoint failed", env.shown)
	}
}

var _ core.RunEnv = (*saveEnv)(nil)
