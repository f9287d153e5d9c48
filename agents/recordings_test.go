package agents

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// stepEnv is a fakeEnv whose ledger write waits until the step's run event and
// checkpoint were also asked for (or its context ends), as writes that share a
// group commit would.
type stepEnv struct {
	*fakeEnv
	mu          sync.Mutex
	event, save chan struct{}
	eventOnce   sync.Once
	saveOnce    sync.Once
	waited      []error // one per ledger write: nil when both came beside it
}

func (e *stepEnv) BeforeModelCall(context.Context) error { return nil }

func (e *stepEnv) RecordModelCall(ctx context.Context, _ core.ModelCall) error {
	var err error
	for _, ch := range []chan struct{}{e.event, e.save} {
		select {
		case <-ch:
		case <-ctx.Done():
			err = errors.New("the ledger write was waited for before the step's other writes")
		}
	}
	e.mu.Lock()
	e.waited = append(e.waited, err)
	e.mu.Unlock()
	return err
}

func (e *stepEnv) RecordEvent(ctx context.Context, typ string, payload any) error {
	if typ == "model_call" {
		e.eventOnce.Do(func() { close(e.event) })
	}
	return e.fakeEnv.RecordEvent(ctx, typ, payload)
}

func (e *stepEnv) Checkpoint(ctx context.Context, raw json.RawMessage) error {
	e.mu.Lock()
	n := len(e.fakeEnv.Checkpoints)
	e.mu.Unlock()
	if n > 0 { // not the first (saved beside the request): the step's
		e.saveOnce.Do(func() { close(e.save) })
	}
	return e.fakeEnv.Checkpoint(ctx, raw)
}

// TestModelCallWritesBesideEachOther: a model call's ledger entry, its run event
// and the step's checkpoint are asked for together, so the store can commit them
// in one group, not one after the other.
func TestModelCallWritesBesideEachOther(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("done"))
	env := &stepEnv{fakeEnv: &fakeEnv{}, event: make(chan struct{}), save: make(chan struct{})}
	trig := env.add(alice, "Alice", "@engineer hi", "engineer")
	job := newJob(env.fakeEnv, engineer, false, trig)
	job.Env = env
	a := newAgent(t, srv, NewRegistry(), func(o *Options) { o.Limits.RunTimeout = 5e9 })
	res, err := execute(t, a, job)
	if err != nil || res.Reply != "done" {
		t.Fatalf("Execute = %q, %v", res.Reply, err)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.waited) != 1 || env.waited[0] != nil {
		t.Fatalf("ledger writes = %v, want one made beside the event and checkpoint", env.waited)
	}
}

var _ core.Meter = (*stepEnv)(nil)
