package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"openbot/core"
	"openbot/core/storetest"
)

// stepRun is what TestRecordStep* read back of the run.
func (h *harness) stepRun(status core.RunStatus) (core.Run, []core.RunEvent) {
	h.t.Helper()
	runs := h.runs(status)
	if len(runs) != 1 {
		h.t.Fatalf("%d %s runs, want 1", len(runs), status)
	}
	evs := storetest.Read(h.t, h.store, func(tx core.ReadTx) ([]core.RunEvent, error) { return tx.RunEvents(runs[0].ID) })
	return runs[0], evs
}

// TestRecordStepIsOneWrite: a step's ledger entry, run event and checkpoint are
// stored in one write transaction (one Batch call), and each is there afterwards.
func TestRecordStepIsOneWrite(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var ws *writeTagger
	h.opts = func(o *core.Options) { ws = &writeTagger{Store: o.Store}; o.Store = ws }
	done := make(chan error, 1)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		err := job.Env.(core.StepRecorder).RecordStep(ctx, core.Step{
			Call:      &core.ModelCall{Call: 1, Profile: "default", Model: "gpt-test", InputTokens: 10, OutputTokens: 2},
			EventType: "model_call", Event: map[string]any{"tool_calls": 0},
			Checkpoint: json.RawMessage(`{"step":1}`)})
		done <- err
		if err != nil {
			return "", err
		}
		<-ctx.Done() // stay running, so the checkpoint is read back
		return "", ctx.Err()
	}
	h.start()
	h.say("hello")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if u, e, c := ws.usage.Load(), ws.event.Load(), ws.cp.Load(); u == 0 || u != e || u != c {
		t.Errorf("ledger entry in write %d, event in write %d, checkpoint in write %d; want one write", u, e, c)
	}
	run, evs := h.stepRun(core.RunRunning)
	if string(run.Checkpoint) != `{"step":1}` {
		t.Errorf("checkpoint = %s, want the step's", run.Checkpoint)
	}
	if last := evs[len(evs)-1]; last.Type != "model_call" || !strings.Contains(string(last.Payload), `"tool_calls":0`) {
		t.Errorf("run events end with %s %s, want the step's model_call", last.Type, last.Payload)
	}
	if l := h.ledger(); len(l) != 1 || l[0].Run != run.ID || l[0].InputTokens != 10 || l[0].Key != core.UsageKey(run.ID, 1) {
		t.Errorf("ledger = %+v, want the step's call", l)
	}
}

// TestRecordStepOfStoppedRunKeepsCall: a step recorded after the run's context
// ended still stores the call's ledger entry and event (it was made and paid
// for), but not the checkpoint, and says why.
func TestRecordStepOfStoppedRunKeepsCall(t *testing.T) {
	h := newHarness(t, core.Limits{})
	errs := make(chan error, 1)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		if err := job.Env.Checkpoint(ctx, json.RawMessage(`{"step":0}`)); err != nil {
			return "", err
		}
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		errs <- job.Env.(core.StepRecorder).RecordStep(stopped, core.Step{
			Call:      &core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 7},
			EventType: "model_call", Event: map[string]any{},
			Checkpoint: json.RawMessage(`{"step":1}`)})
		<-ctx.Done()
		return "", ctx.Err()
	}
	h.start()
	h.say("hello")
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("RecordStep = %v, want the checkpoint's refusal", err)
	}
	run, evs := h.stepRun(core.RunRunning)
	if string(run.Checkpoint) != `{"step":0}` {
		t.Errorf("checkpoint = %s, want the one before the step", run.Checkpoint)
	}
	if last := evs[len(evs)-1]; last.Type != "model_call" {
		t.Errorf("run events end with %s %s, want the step's model_call", last.Type, last.Payload)
	}
	if l := h.ledger(); len(l) != 1 || l[0].InputTokens != 7 {
		t.Errorf("ledger = %+v, want the step's call", l)
	}
}

// writeTagger tags each write transaction (Update or Batch call) with a number
// and notes in which ones the ledger got an entry and a run was completed.
type writeTagger struct {
	core.Store
	n         atomic.Int64
	usage     atomic.Int64 // the call that put a ledger entry (0: none)
	completed atomic.Int64 // the call that completed a run (0: none)
	cp        atomic.Int64 // the call that put a run with a checkpoint
	event     atomic.Int64 // the call that appended a model_call event
}

func (s *writeTagger) Update(ctx context.Context, fn func(core.Tx) error) error {
	id := s.n.Add(1)
	return s.Store.Update(ctx, func(tx core.Tx) error { return fn(taggedTx{tx, s, id}) })
}

func (s *writeTagger) Batch(ctx context.Context, fn func(core.Tx) error) error {
	id := s.n.Add(1)
	return s.Store.Batch(ctx, func(tx core.Tx) error { return fn(taggedTx{tx, s, id}) })
}

type taggedTx struct {
	core.Tx
	s  *writeTagger
	id int64
}

func (t taggedTx) PutUsage(e core.UsageEntry) (core.UsageEntry, bool, error) {
	t.s.usage.Store(t.id)
	return t.Tx.PutUsage(e)
}

func (t taggedTx) AppendRunEvent(e core.RunEvent) (core.RunEvent, error) {
	if e.Type == "model_call" {
		t.s.event.Store(t.id)
	}
	return t.Tx.AppendRunEvent(e)
}

func (t taggedTx) PutRun(r core.Run) (core.Run, error) {
	if r.Status == core.RunCompleted {
		t.s.completed.Store(t.id)
	}
	if len(r.Checkpoint) > 0 {
		t.s.cp.Store(t.id)
	}
	return t.Tx.PutRun(r)
}

// TestLastStepStoredWithSettle: a Result's Step (the call that gave the reply)
// is stored in the transaction that settles the run (the same Batch call, so
// it costs no write of its own): its ledger entry and event are there.
func TestLastStepStoredWithSettle(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var ws *writeTagger
	h.opts = func(o *core.Options) { ws = &writeTagger{Store: o.Store}; o.Store = ws }
	h.agent.pause = func(*core.Job) (core.Result, bool) {
		return core.Result{Reply: "the answer", Usage: core.Usage{ModelCalls: 1},
			Step: &core.Step{Call: &core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 12, OutputTokens: 3},
				EventType: "model_call", Event: map[string]any{"finish_reason": "stop"}}}, true
	}
	h.start()
	res := h.say("hello")
	h.idle()
	run, evs := h.stepRun(core.RunCompleted)
	if u, c := ws.usage.Load(), ws.completed.Load(); u == 0 || u != c {
		t.Errorf("ledger entry put in write %d, run completed in write %d; want the step inside the settle", u, c)
	}
	if l := h.ledger(); len(l) != 1 || l[0].Run != run.ID || l[0].InputTokens != 12 || l[0].Key != core.UsageKey(run.ID, 1) {
		t.Errorf("ledger = %+v, want the last step's call", l)
	}
	if n := len(evs); n < 2 || evs[n-2].Type != "model_call" || evs[n-1].Type != "status" {
		t.Errorf("run events = %+v, want the step's model_call then the status", evs)
	}
	if got := h.messages(res.Thread); got[len(got)-1].Text != "the answer" {
		t.Errorf("last message = %q, want the reply", got[len(got)-1].Text)
	}
}

// TestRecordStepKeepsCallOfUnencodableEvent: an event that cannot be encoded is
// left out and reported; the call's ledger entry is stored all the same.
func TestRecordStepKeepsCallOfUnencodableEvent(t *testing.T) {
	h := newHarness(t, core.Limits{})
	errs := make(chan error, 1)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		errs <- job.Env.(core.StepRecorder).RecordStep(ctx, core.Step{
			Call:      &core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 5},
			EventType: "model_call", Event: map[string]any{"bad": func() {}}})
		return "done", nil
	}
	h.start()
	h.say("hello")
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "model_call") {
		t.Errorf("RecordStep = %v, want the event's encoding error", err)
	}
	h.idle()
	if l := h.ledger(); len(l) != 1 || l[0].InputTokens != 5 {
		t.Errorf("ledger = %+v, want the call", l)
	}
}
