package agents

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// stepEnv is a fakeEnv that is a core.StepRecorder and core.Meter: it keeps the
// steps it is given, and counts the writes made one at a time instead.
type stepEnv struct {
	*fakeEnv
	mu    sync.Mutex
	steps []core.Step
	calls int // RecordModelCall: the ledger written on its own
}

func (e *stepEnv) BeforeModelCall(context.Context, core.ModelCall) error { return nil }

func (e *stepEnv) RecordModelCall(context.Context, core.ModelCall) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	return nil
}

func (e *stepEnv) RecordStep(_ context.Context, s core.Step) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.steps = append(e.steps, s)
	return nil
}

var (
	_ core.Meter        = (*stepEnv)(nil)
	_ core.StepRecorder = (*stepEnv)(nil)
)

// TestModelCallIsOneStepWrite: a model call's ledger entry, its run event and
// the checkpoint after it are handed to the store as one step (one transaction,
// one commit), not as three writes; the call that gives the reply is handed back
// in the Result, for core to store with the run's settling. Only the first
// checkpoint (stored beside the request) and those around a tool call are
// writes of their own.
func TestModelCallIsOneStepWrite(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.Call(ReadHistoryName, `{}`)),
		openaitest.Reply{Text: "done", Usage: openaitest.Usage{PromptTokens: 30, CompletionTokens: 4}})
	env := &stepEnv{fakeEnv: &fakeEnv{}}
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
	if env.calls != 0 {
		t.Errorf("RecordModelCall made %d times on its own, want every call inside a step", env.calls)
	}
	if n := strings.Count(strings.Join(env.eventTypes(), ","), "model_call"); n != 0 {
		t.Errorf("%d model_call events recorded on their own, want them inside the steps", n)
	}
	if len(env.fakeEnv.Checkpoints) != 3 {
		t.Errorf("checkpoints stored on their own = %d, want 3 (start, tool started, tool done)", len(env.fakeEnv.Checkpoints))
	}
	if len(env.steps) != 1 {
		t.Fatalf("steps recorded = %d, want 1 (the tool call's)", len(env.steps))
	}
	if s := env.steps[0]; s.Call == nil || s.Call.Call != 1 || s.EventType != "model_call" || s.Event == nil || s.Checkpoint == nil {
		t.Errorf("step = call %+v, event %q %v, checkpoint %d bytes; want call 1, its model_call event and a checkpoint",
			s.Call, s.EventType, s.Event, len(s.Checkpoint))
	} else {
		var cp map[string]any
		if err := json.Unmarshal(s.Checkpoint, &cp); err != nil || !strings.Contains(string(s.Checkpoint), ReadHistoryName) {
			t.Errorf("checkpoint = %s (%v), want the tool call in it", s.Checkpoint, err)
		}
	}
	last := res.Step
	if last == nil || last.Call == nil || last.Call.Call != 2 || last.Call.InputTokens != 30 || last.EventType != "model_call" {
		t.Fatalf("Result.Step = %+v, want the reply's call 2 with its usage and event", last)
	}
}
