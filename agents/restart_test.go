package agents

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
)

// setClock is a core.Clock the test moves.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *setClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// stepCheckpoints runs a lookup-then-answer job and returns its step
// checkpoints: start, model answer, lookup started, lookup done, final answer.
func stepCheckpoints(t *testing.T, clock core.Clock) []json.RawMessage {
	t.Helper()
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}), openaitest.Text("The answer is 42."))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer what is the answer?", "engineer")
	a := newAgent(t, srv, lookupRegistry(t, new(int), false), func(o *Options) { o.Clock = clock })
	bot := engineer
	bot.Tools = []string{"lookup"}
	if _, err := execute(t, a, newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	if len(env.Checkpoints) != 5 {
		t.Fatalf("checkpoints = %d, want 5", len(env.Checkpoints))
	}
	return env.Checkpoints
}

func lookupRegistry(t *testing.T, calls *int, repeatable bool) *Registry {
	reg := NewRegistry()
	if err := reg.Add(&FuncTool{ToolName: "lookup", Desc: "look up", Repeatable: repeatable,
		Fn: func(context.Context, ToolCall) (string, error) { *calls++; return "42", nil }}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// restarted is what restartJob observed.
type restarted struct {
	res   core.Result
	env   *fakeEnv
	srv   *openaitest.Server
	calls int // calls that reached the lookup tool
}

// restartJob resumes a run from cp after a restart, at clock time now.
func restartJob(t *testing.T, cp json.RawMessage, repeatable bool, clock *setClock, reply ...openaitest.Reply) (restarted, error) {
	t.Helper()
	srv := openaitest.New(t)
	srv.Enqueue(reply...)
	calls := 0
	a := newAgent(t, srv, lookupRegistry(t, &calls, repeatable), func(o *Options) { o.Clock = clock })
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer what is the answer?", "engineer")
	bot := engineer
	bot.Tools = []string{"lookup"}
	job := newJob(env, bot, false, trig)
	job.Run.Checkpoint, job.Restart = cp, true
	res, err := execute(t, a, job)
	return restarted{res: res, env: env, srv: srv, calls: calls}, err
}

// TestRestartResumesFromEachStep resumes from every step checkpoint: no
// finished model call or tool call runs again, a started call of a tool that
// is not safe to repeat is reported interrupted, a repeat-safe one runs again.
func TestRestartResumesFromEachStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := &setClock{t: t0}
	cps := stepCheckpoints(t, clock)
	final := openaitest.Text("The answer is 42.")
	cases := []struct {
		name       string
		cp         int
		repeatable bool
		requests   int
		toolCalls  int
		interrupt  bool
	}{
		{"start", 0, false, 2, 1, false},
		{"model answer", 1, false, 1, 1, false},
		{"lookup started, not safe to repeat", 2, false, 1, 0, true},
		{"lookup started, safe to repeat", 2, true, 1, 1, false},
		{"lookup done", 3, false, 1, 0, false},
		{"final answer", 4, false, 0, 0, false},
	}
	for _, c := range cases {
		replies := []openaitest.Reply{final}
		if c.requests == 2 {
			replies = []openaitest.Reply{openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}), final}
		}
		got, err := restartJob(t, cps[c.cp], c.repeatable, clock, replies...)
		res, env, srv, calls := got.res, got.env, got.srv, got.calls
		if err != nil || res.Reply != "The answer is 42." {
			t.Errorf("%s: result %+v, %v", c.name, res, err)
			continue
		}
		reqs := srv.Requests()
		if len(reqs) != c.requests || calls != c.toolCalls {
			t.Errorf("%s: model requests %d, tool calls %d; want %d and %d", c.name, len(reqs), calls, c.requests, c.toolCalls)
		}
		if len(reqs) > 0 && c.cp >= 2 {
			msgs := reqs[len(reqs)-1].Body.Messages
			last := msgs[len(msgs)-1]
			if got := strings.Contains(last.Content, "interrupted by a restart"); last.Role != "tool" || got != c.interrupt {
				t.Errorf("%s: last message %s %q; interrupted=%v wanted", c.name, last.Role, last.Content, c.interrupt)
			}
		}
		if len(env.Posted) != 0 {
			t.Errorf("%s: posted %q after a quick resume", c.name, env.Posted)
		}
	}
}

// TestRestartNoticeOnlyWhenSlow: the thread hears "resumed after a restart"
// only when the run resumes ResumeNoticeAfter or more after its last step.
func TestRestartNoticeOnlyWhenSlow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := &setClock{t: t0}
	cps := stepCheckpoints(t, clock)
	for _, wait := range []time.Duration{ResumeNoticeAfter - time.Second, ResumeNoticeAfter} {
		clock.set(t0.Add(wait))
		got, err := restartJob(t, cps[1], false, clock, openaitest.Text("The answer is 42."))
		env := got.env
		if err != nil {
			t.Fatal(err)
		}
		want := wait >= ResumeNoticeAfter
		if got := len(env.Posted) == 1 && strings.Contains(env.Posted[0], "resumed after a restart"); got != want || len(env.Posted) > 1 {
			t.Errorf("after %s: posted %q, want a notice: %v", wait, env.Posted, want)
		}
	}
}

// TestRestartCannotResume: a missing, unreadable or older-format checkpoint
// fails the run with the restart notice and calls nothing.
func TestRestartCannotResume(t *testing.T) {
	clock := &setClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	cps := stepCheckpoints(t, clock)
	var old map[string]any
	if err := json.Unmarshal(cps[1], &old); err != nil {
		t.Fatal(err)
	}
	old["version"] = 2
	v2, _ := json.Marshal(old)
	for name, cp := range map[string]json.RawMessage{"missing": nil, "corrupt": json.RawMessage(`{"version":`),
		"older format": v2, "unresumable": json.RawMessage(`{"version":3,"unresumable":"too large"}`)} {
		got, err := restartJob(t, cp, true, clock, openaitest.Text("never"))
		srv, calls := got.srv, got.calls
		var pe core.PeopleError
		if !errors.Is(err, ErrBadCheckpoint) || !errors.As(err, &pe) || !strings.Contains(pe.Notice(), "could not be resumed") {
			t.Errorf("%s: err = %v", name, err)
		}
		if len(srv.Requests()) != 0 || calls != 0 {
			t.Errorf("%s: %d model requests, %d tool calls", name, len(srv.Requests()), calls)
		}
	}
}
