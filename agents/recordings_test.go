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

func (e *stepEnv) BeforeModelCall(context.Context) error { return nil }

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
// one commit), not as three writes; only the first checkpoint (stored beside the
// request) and those around a tool call are writes of their own.
func TestModelCallIsOneStepWrite(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.Call(ReadHistoryName, `{}`)), openaitest.Text("done"))
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
	if len(env.steps) != 2 {
		t.Fatalf("steps = %d, want one per model call (2)", len(env.steps))
	}
	for i, s := range env.steps {
		if s.Call == nil || s.Call.Call != i+1 || s.EventType != "model_call" || s.Event == nil || s.Checkpoint == nil {
			t.Errorf("step %d = call %+v, event %q %v, checkpoint %d bytes; want call %d, its model_call event and a checkpoint",
				i, s.Call, s.EventType, s.Event, len(s.Checkpoint), i+1)
		}
	}
	// The last step's checkpoint holds the answer it follows.
	var cp map[string]any
	if err := json.Unmarshal(env.steps[1].Checkpoint, &cp); err != nil || !strings.Contains(string(env.steps[1].Checkpoint), "done") {
		t.Errorf("last checkpoint = %s (%v), want the answer in it", env.steps[1].Checkpoint, err)
	}
}
