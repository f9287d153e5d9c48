package agents

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/bolt"
)

// ledgerEnv is a fakeEnv whose core.Meter writes the ledger of a real store
// with the key the agent gives (core.UsageKey), as core's RunEnv does.
type ledgerEnv struct {
	*fakeEnv
	store  core.Store
	budget error // returned by BeforeModelCall when set
}

func (e *ledgerEnv) BeforeModelCall(context.Context, core.ModelCall) error { return e.budget }

func (e *ledgerEnv) RecordModelCall(ctx context.Context, c core.ModelCall) error {
	return e.store.Update(ctx, func(tx core.Tx) error {
		_, _, err := tx.PutUsage(core.UsageEntry{Key: core.UsageKey(7, c.Call), Bot: "engineer", Thread: 1, Run: 7,
			Model: c.Model, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CachedTokens: c.CachedTokens})
		return err
	})
}

func ledgerLen(t *testing.T, st core.Store) int {
	t.Helper()
	var n int
	if err := st.View(context.Background(), func(tx core.ReadTx) error {
		es, err := tx.UsageEntries(0, 0)
		n = len(es)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLedgerCountsResumedAndRetriedCallsOnce: a model call retried by the
// transport (HTTP 500, then success) is one ledger entry; a run resumed after a
// restart from a step checkpoint taken before its last recorded call makes the
// call again under the same (run, call) key, so the ledger still counts it once.
func TestLedgerCountsResumedAndRetriedCallsOnce(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &setClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	noSleep := func(o *Options) {
		o.Clock = clock
		o.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	}

	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Error(500, "try again"),
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}},
			Usage: openaitest.Usage{PromptTokens: 100, CompletionTokens: 5, CachedTokens: 60}},
		openaitest.Text("The answer is 42."))
	env := &ledgerEnv{fakeEnv: &fakeEnv{}, store: st}
	trig := env.add(alice, "Alice", "@engineer what is the answer?", "engineer")
	bot := engineer
	bot.Tools = []string{"lookup"}
	a := newAgent(t, srv, lookupRegistry(t, new(int), false), noSleep)
	if _, err := execute(t, a, withEnv(newJob(env.fakeEnv, bot, false, trig), env)); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("model requests = %d, want 3 (one retried)", n)
	}
	if n := ledgerLen(t, st); n != 2 {
		t.Fatalf("ledger after the run = %d entries, want 2 (the retry is the same call)", n)
	}
	_ = st.View(context.Background(), func(tx core.ReadTx) error {
		es, err := tx.UsageEntries(0, 1)
		if err != nil || len(es) != 1 || es[0].Key != "run:7:call:1" || es[0].InputTokens != 100 || es[0].OutputTokens != 5 || es[0].CachedTokens != 60 {
			t.Errorf("first ledger entry = %+v, %v; want run 7 call 1 with 100 in (60 cached), 5 out", es, err)
		}
		return nil
	})
	// Restart from each checkpoint: every call the resumed run makes again
	// has a key already in the ledger.
	for i, cp := range env.Checkpoints {
		srv2 := openaitest.New(t)
		if i == 0 {
			srv2.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}))
		}
		srv2.Enqueue(openaitest.Text("The answer is 42."))
		env2 := &ledgerEnv{fakeEnv: &fakeEnv{}, store: st}
		trig2 := env2.add(alice, "Alice", "@engineer what is the answer?", "engineer")
		job := withEnv(newJob(env2.fakeEnv, bot, false, trig2), env2)
		job.Run.Checkpoint, job.Restart = cp, true
		if _, err := execute(t, newAgent(t, srv2, lookupRegistry(t, new(int), true), noSleep), job); err != nil {
			t.Fatalf("resume from checkpoint %d: %v", i, err)
		}
		if n := ledgerLen(t, st); n != 2 {
			t.Errorf("ledger after resuming from checkpoint %d (%d model requests) = %d entries, want 2", i, len(srv2.Requests()), n)
		}
	}
}

// withEnv sets the job's RunEnv.
func withEnv(j *core.Job, env core.RunEnv) *core.Job { j.Env = env; return j }

// TestModelParamsAndTokenCapPerRun: a bot's max_tokens, temperature and
// reasoning_effort go with each model call; max_tokens_per_run stops the run
// before the call that would exceed it, with a notice naming the setting.
func TestModelParamsAndTokenCapPerRun(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}},
		Usage: openaitest.Usage{PromptTokens: 400, CompletionTokens: 200}}, openaitest.Text("never asked"))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer what is the answer?", "engineer")
	bot := engineer
	bot.Tools = []string{"lookup"}
	temp := 0.3
	bot.MaxTokens, bot.Temperature, bot.ReasoningEffort, bot.MaxTokensPerRun = 256, &temp, "low", 500
	_, err := execute(t, newAgent(t, srv, lookupRegistry(t, new(int), false), nil), newJob(env, bot, false, trig))
	var pe core.PeopleError
	if !errors.Is(err, ErrTokenLimit) || !errors.As(err, &pe) || !strings.Contains(pe.Notice(), "600 tokens, its limit is 500 (max_tokens_per_run)") {
		t.Fatalf("err = %v, want the token limit with a notice", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model requests = %d, want 1", len(reqs))
	}
	j := reqs[0].JSON
	if j["max_tokens"] != float64(256) || j["reasoning_effort"] != "low" {
		t.Errorf("request params: max_tokens=%v reasoning_effort=%v", j["max_tokens"], j["reasoning_effort"])
	}
	if f, ok := j["temperature"].(float64); !ok || f < 0.29 || f > 0.31 {
		t.Errorf("request temperature = %v, want 0.3", j["temperature"])
	}
}
