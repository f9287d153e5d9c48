package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"openbot/core"
)

// failSettleStore fails every write transaction that would mark a run
// completed, as a store that cannot write the run's settling would.
// failed is closed at the first such failure.
type failSettleStore struct {
	core.Store
	once   *sync.Once
	failed chan struct{}
}

func (s failSettleStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return s.Store.Batch(ctx, func(tx core.Tx) error { return fn(failSettleTx{tx, s}) })
}

type failSettleTx struct {
	core.Tx
	s failSettleStore
}

func (t failSettleTx) PutRun(r core.Run) (core.Run, error) {
	if r.Status == core.RunCompleted {
		t.s.once.Do(func() { close(t.s.failed) })
		return r, errors.New("disk full")
	}
	return t.Tx.PutRun(r)
}

// TestLastStepKeptWhenSettleFails: when the transaction that settles a run
// fails, the run's last model call (Result.Step) was still made and paid for:
// its ledger entry and run event are stored on their own, as they were before
// the settle carried them.
func TestLastStepKeptWhenSettleFails(t *testing.T) {
	h := newHarness(t, core.Limits{})
	fs := failSettleStore{once: &sync.Once{}, failed: make(chan struct{})}
	h.opts = func(o *core.Options) { fs.Store = o.Store; o.Store = fs }
	h.agent.pause = func(*core.Job) (core.Result, bool) {
		return core.Result{Reply: "the answer", Usage: core.Usage{ModelCalls: 1},
			Step: &core.Step{Call: &core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 12, OutputTokens: 3},
				EventType: "model_call", Event: map[string]any{"finish_reason": "stop"}}}, true
	}
	h.start()
	h.say("hello")
	<-fs.failed
	h.stop() // waits for the run's end, then closes the store
	h.reopen()
	run, evs := h.stepRun(core.RunRunning) // the settle failed: it stays running
	if l := h.ledger(); len(l) != 1 || l[0].Key != core.UsageKey(run.ID, 1) || l[0].InputTokens != 12 {
		t.Errorf("ledger = %+v, want the last step's call", l)
	}
	found := false
	for _, ev := range evs {
		found = found || ev.Type == "model_call"
	}
	if !found {
		t.Errorf("run events = %+v, want the last step's model_call", evs)
	}
}

// stepThenStopAgent answers no run: it waits until the run is stopped and
// returns the model call it made meanwhile as its Step, with the stop's error.
type stepThenStopAgent struct{ started chan struct{} }

func (a stepThenStopAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	close(a.started)
	<-ctx.Done()
	return core.Result{Usage: core.Usage{ModelCalls: 1},
		Step: &core.Step{Call: &core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 9},
			EventType: "model_call", Event: map[string]any{"error": "run stopped"}}}, ctx.Err()
}

// TestStepOfRunStoppedByShutdownKept: a run that shutdown stopped is not
// settled (it resumes at the next start), but the Step its agent returned was
// a model call made and paid for: its ledger entry and event are stored
// (Result.Step: whatever the outcome).
func TestStepOfRunStoppedByShutdownKept(t *testing.T) {
	h := newHarness(t, core.Limits{})
	a := stepThenStopAgent{started: make(chan struct{})}
	h.stopMidRun(a, a.started)
	run, evs := h.stepRun(core.RunRunning)
	if l := h.ledger(); len(l) != 1 || l[0].Key != core.UsageKey(run.ID, 1) {
		t.Errorf("ledger = %+v, want the step's call", l)
	}
	if last := evs[len(evs)-1]; last.Type != "model_call" {
		t.Errorf("run events end with %s, want the step's model_call", last.Type)
	}
}
