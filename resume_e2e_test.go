package openbot_test

// End-to-end tests of resuming interrupted runs (DESIGN.md §8): the console
// channel, the core engine, the bbolt store and the real agent loop against the
// fake OpenAI-compatible server. A kill is simulated in this process: at a step
// boundary the store stops committing anything (the write in flight is dropped
// or, after its commit, nothing later is written), the fake model and tools stop
// taking effect, the engine is cancelled, and the bbolt file is reopened by a new
// engine with a new agent. resume_kill_test.go kills a child process for real.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/adapters/console"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/bolt"
)

var errKilled = errors.New("killed")

// killStore is a core.Store that dies on kill: from then on nothing is read or
// written. at, when set, is asked about every run written with a checkpoint and
// may kill before that write commits (the write is lost) or right after it.
type killStore struct {
	core.Store
	dead   atomic.Bool
	once   sync.Once
	killed chan struct{}
	at     func(cp stepView) (kill, beforeCommit bool)
}

func newKillStore(st core.Store) *killStore {
	return &killStore{Store: st, killed: make(chan struct{})}
}

func (s *killStore) kill() {
	s.once.Do(func() { s.dead.Store(true); close(s.killed) })
}

func (s *killStore) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.View(ctx, fn)
}

func (s *killStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	if s.dead.Load() {
		return errKilled
	}
	after := false
	err := s.Store.Update(ctx, func(tx core.Tx) error {
		after = false
		if s.dead.Load() {
			return errKilled
		}
		return fn(&killTx{Tx: tx, s: s, after: &after})
	})
	if err == nil && after {
		s.kill()
	}
	return err
}

func (s *killStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return s.Update(ctx, fn)
}

type killTx struct {
	core.Tx
	s     *killStore
	after *bool
}

func (t *killTx) PutRun(r core.Run) (core.Run, error) {
	if t.s.at != nil && len(r.Checkpoint) > 0 && r.Status == core.RunRunning {
		var v stepView
		if json.Unmarshal(r.Checkpoint, &v) == nil {
			if kill, before := t.s.at(v); kill && before {
				t.s.kill()
				return r, errKilled
			} else if kill {
				*t.after = true
			}
		}
	}
	return t.Tx.PutRun(r)
}

// stepView is what the tests read of an agent checkpoint.
type stepView struct {
	Transcript []struct {
		Role      string            `json:"role"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	} `json:"transcript"`
	Pending *struct {
		Calls []struct {
			Call struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"call"`
			Started bool `json:"started"`
			Done    bool `json:"done"`
		} `json:"calls"`
	} `json:"pending"`
}

// call reports whether the pending turn has a call of tool that is started and
// whether it is done.
func (v stepView) call(tool string) (started, done bool) {
	if v.Pending == nil {
		return false, false
	}
	for _, c := range v.Pending.Calls {
		if c.Call.Function.Name == tool {
			return c.Started, c.Done
		}
	}
	return false, false
}

// final reports whether the checkpoint holds the model's final answer.
func (v stepView) final() bool {
	n := len(v.Transcript)
	return v.Pending == nil && n > 0 && v.Transcript[n-1].Role == "assistant" && len(v.Transcript[n-1].ToolCalls) == 0
}

// resumeRig is one bbolt file that engines are started on, one after the other,
// with a fake model and fake tools whose effects are counted across them.
type resumeRig struct {
	t    testing.TB
	path string
	srv  *openaitest.Server
	out  *syncBuffer
	team []core.BotProfile

	mu       sync.Mutex
	modelRan map[int]int    // finished model calls by step (tool results in the request)
	toolIn   map[string]int // calls that reached a tool
	toolRan  map[string]int // calls that finished
	// hooks, by "model:<step>" or "tool:<name>", run when that step starts in
	// the current engine; they may kill it.
	hooks map[string]func(ctx context.Context)
	// grace is the engines' ShutdownGrace; 0 is 2s.
	grace  time.Duration
	limits core.Limits

	cur *resumeEngine
}

// resumeEngine is one running engine of a rig.
type resumeEngine struct {
	st     *killStore
	eng    *core.Engine
	in     *io.PipeWriter
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

const resumeFinal = "all done"

// newResumeRig scripts the model: a call of step_a, then a call of step_b, then
// the final answer, chosen by the number of tool results in the request.
func newResumeRig(t testing.TB, team []core.BotProfile, script func(step int) openaitest.Reply) *resumeRig {
	x := &resumeRig{t: t, path: filepath.Join(t.TempDir(), "openbot.db"), srv: openaitest.New(t), out: &syncBuffer{}, team: team,
		modelRan: map[int]int{}, toolIn: map[string]int{}, toolRan: map[string]int{}, hooks: map[string]func(context.Context){}}
	x.srv.Handle(func(r openaitest.Request) openaitest.Reply {
		step := 0
		for _, m := range r.Body.Messages {
			if m.Role == "tool" {
				step++
			}
		}
		x.hook(context.Background(), fmt.Sprint("model:", step))
		if x.cur.st.dead.Load() {
			return openaitest.Error(400, "the process is dead")
		}
		x.mu.Lock()
		x.modelRan[step]++
		x.mu.Unlock()
		return script(step)
	})
	return x
}

func (x *resumeRig) hook(ctx context.Context, name string) {
	x.mu.Lock()
	h := x.hooks[name]
	x.mu.Unlock()
	if h != nil {
		h(ctx)
	}
}

// tool is a fake tool with effects: counted when reached and when finished.
func (x *resumeRig) tool(name string, repeatable bool) agents.Tool {
	return &agents.FuncTool{ToolName: name, Desc: "does " + name, Repeatable: repeatable,
		Fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			if x.cur.st.dead.Load() {
				return "", errKilled
			}
			x.mu.Lock()
			x.toolIn[name]++
			x.mu.Unlock()
			x.hook(ctx, "tool:"+name)
			if x.cur.st.dead.Load() || ctx.Err() != nil {
				return "", errKilled // killed mid-call: the call never finishes
			}
			x.mu.Lock()
			x.toolRan[name]++
			x.mu.Unlock()
			return name + " ok", nil
		}}
}

// start opens the bbolt file and runs a new engine with a new agent on it.
func (x *resumeRig) start(at func(stepView) (bool, bool)) {
	t := x.t
	t.Helper()
	bst, err := bolt.Open(x.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &resumeEngine{st: newKillStore(bst)}
	e.st.at = at
	x.cur = e
	reg := agents.NewRegistry()
	for _, tl := range []agents.Tool{x.tool("step_a", false), x.tool("step_b", true), x.tool("deploy", false)} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	ag, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: x.srv.URL(), APIKey: "test-key", Model: "test-model"}},
		Registry:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	grace := x.grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	e.eng, err = core.New(core.Options{Store: e.st, Agent: ag, Bots: x.team, Limits: x.limits, ShutdownGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	e.in = pw
	con, err := console.New(console.Options{Engine: e.eng, In: pr, Out: x.out})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.eng.AddAdapter(con); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(2)
	go func() { defer e.wg.Done(); _ = e.eng.Run(ctx) }()
	go func() { defer e.wg.Done(); _ = con.Run(ctx) }()
	t.Cleanup(func() { x.stop(e) })
	<-e.eng.Ready()
}

// stop cancels an engine and closes its store (once).
func (x *resumeRig) stop(e *resumeEngine) {
	if e.cancel == nil {
		return
	}
	e.in.Close()
	e.cancel()
	e.wg.Wait()
	e.cancel = nil
	if err := e.st.Store.Close(); err != nil {
		x.t.Error(err)
	}
}

// say types a line into the current engine's console.
func (x *resumeRig) say(line string) {
	x.t.Helper()
	if _, err := io.WriteString(x.cur.in, line+"\n"); err != nil {
		x.t.Fatal(err)
	}
}

// waitKilled waits for the current engine to be killed, then lets it end.
func (x *resumeRig) waitKilled() {
	x.t.Helper()
	select {
	case <-x.cur.st.killed:
	case <-time.After(15 * time.Second):
		x.t.Fatalf("the engine was never killed; printed:\n%s", x.out.String())
	}
	x.stop(x.cur)
}

func (x *resumeRig) idle() {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := x.cur.eng.WaitIdle(ctx); err != nil {
		x.t.Fatalf("not idle: %v; printed:\n%s", err, x.out.String())
	}
}

// count is how many printed blocks contain s.
func (x *resumeRig) count(s string) int {
	n := 0
	for _, b := range x.out.blocks() {
		if strings.Contains(b, s) {
			n++
		}
	}
	return n
}

// toolResults are the tool results the model got in the last request.
func (x *resumeRig) toolResults() []string {
	reqs := x.srv.Requests()
	var out []string
	for _, m := range reqs[len(reqs)-1].Body.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

var resumeTeam = []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"step_a", "step_b", "deploy"}, ApprovalTools: []string{"deploy"}}}

// twoTools is the scripted run: step_a, then step_b, then the final answer.
func twoTools(step int) openaitest.Reply {
	switch step {
	case 0:
		return openaitest.Calls(openaitest.Call("step_a", `{}`))
	case 1:
		return openaitest.Calls(openaitest.Call("step_b", `{}`))
	}
	return openaitest.Text(resumeFinal)
}

// TestResumeAfterKillAtEveryStep kills the engine at every step boundary of a
// run with two tool calls (step_a is not safe to repeat, step_b is) and starts a
// new one on the same file: the run completes, every model call and tool call
// that had finished ran once, the reply is posted once, and a call of step_a
// killed mid-call is reported to the model as interrupted, not run again.
func TestResumeAfterKillAtEveryStep(t *testing.T) {
	type boundary struct {
		name string
		hook string                               // kill when this step starts
		at   func(v stepView) (kill, before bool) // or at this checkpoint
	}
	started := func(tool string) func(stepView) (bool, bool) {
		return func(v stepView) (bool, bool) { s, d := v.call(tool); return s && !d, true }
	}
	done := func(tool string) func(stepView) (bool, bool) {
		return func(v stepView) (bool, bool) { _, d := v.call(tool); return d, false }
	}
	boundaries := []boundary{
		{name: "before model call 1", hook: "model:0"},
		{name: "after model call 1", at: started("step_a")},
		{name: "during step_a", hook: "tool:step_a"},
		{name: "after step_a", at: done("step_a")},
		{name: "before model call 2", hook: "model:1"},
		{name: "after model call 2", at: started("step_b")},
		{name: "during step_b", hook: "tool:step_b"},
		{name: "after step_b", at: done("step_b")},
		{name: "before model call 3", hook: "model:2"},
		{name: "after model call 3", at: func(v stepView) (bool, bool) { return v.final(), false }},
	}
	for _, b := range boundaries {
		t.Run(b.name, func(t *testing.T) {
			x := newResumeRig(t, resumeTeam, twoTools)
			if b.hook != "" {
				x.hooks[b.hook] = func(context.Context) {
					x.mu.Lock()
					delete(x.hooks, b.hook) // once: the next engine goes on
					x.mu.Unlock()
					x.cur.st.kill()
				}
			}
			x.start(b.at)
			x.say("please do both steps")
			x.waitKilled()
			x.start(nil)
			x.idle()

			if n := x.count("[engineer] " + resumeFinal); n != 1 {
				t.Errorf("reply printed %d times, want 1; printed:\n%s", n, x.out.String())
			}
			if n := x.count("could not finish") + x.count("interrupted because openbot restarted"); n != 0 {
				t.Errorf("failure notices printed:\n%s", x.out.String())
			}
			x.mu.Lock()
			defer x.mu.Unlock()
			for step := 0; step < 3; step++ {
				if x.modelRan[step] != 1 {
					t.Errorf("model call %d finished %d times, want 1", step+1, x.modelRan[step])
				}
			}
			wantA := 1
			if b.name == "during step_a" {
				wantA = 0                 // interrupted, not safe to repeat: the model is told
				second := x.toolResults() // of the last request
				if len(second) == 0 || !strings.Contains(second[0], "interrupted by a restart") {
					t.Errorf("tool results the model got = %q, want step_a reported interrupted", second)
				}
			}
			if x.toolRan["step_a"] != wantA || x.toolIn["step_a"] != 1 {
				t.Errorf("step_a reached %d times, finished %d times; want 1 and %d", x.toolIn["step_a"], x.toolRan["step_a"], wantA)
			}
			if x.toolRan["step_b"] != 1 {
				t.Errorf("step_b finished %d times, want 1", x.toolRan["step_b"])
			}
		})
	}
}

// approveDeploy waits for the question of the deploy call and approves it.
func (x *resumeRig) approveDeploy() core.QuestionID {
	x.t.Helper()
	var q core.Question
	deadline := time.Now().Add(15 * time.Second)
	for {
		var qs []core.Question
		err := x.cur.st.View(context.Background(), func(tx core.ReadTx) error {
			var err error
			qs, err = tx.Questions(true, 0)
			return err
		})
		if err != nil {
			x.t.Fatal(err)
		}
		if len(qs) == 1 && len(qs[0].Askers) > 0 {
			q = qs[0]
			break
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("no question; printed:\n%s", x.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := x.cur.eng.Answer(context.Background(), core.Answer{Question: q.ID, Choice: core.ChoiceApprove, Actor: q.Askers[0], Name: "You"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		x.t.Fatalf("approve: %+v, %v", res, err)
	}
	return q.ID
}

// outcome is the stored outcome of question id.
func (x *resumeRig) outcome(id core.QuestionID) string {
	x.t.Helper()
	var q core.Question
	err := x.cur.st.View(context.Background(), func(tx core.ReadTx) error {
		var err error
		q, err = tx.Question(id)
		return err
	})
	if err != nil {
		x.t.Fatal(err)
	}
	return q.Outcome
}

// TestResumeApprovedCall: an approved call of deploy (not safe to repeat) that
// a kill interrupted mid-call is reported to the model as interrupted and not
// run again; an approval recorded just before a kill (the call had not
// started) runs its call exactly once after the restart.
func TestResumeApprovedCall(t *testing.T) {
	script := func(step int) openaitest.Reply {
		if step == 0 {
			return openaitest.Calls(openaitest.Call("deploy", `{"target":"prod"}`))
		}
		return openaitest.Text(resumeFinal)
	}
	for _, midCall := range []bool{true, false} {
		x := newResumeRig(t, resumeTeam, script)
		var at func(stepView) (bool, bool)
		if midCall {
			x.hooks["tool:deploy"] = func(context.Context) { x.cur.st.kill() }
		} else {
			// Kill as the resumed run is about to start the approved call.
			at = func(v stepView) (bool, bool) { s, d := v.call("deploy"); return s && !d, true }
		}
		x.start(at)
		x.say("deploy to prod")
		q := x.approveDeploy()
		x.waitKilled()
		x.mu.Lock()
		delete(x.hooks, "tool:deploy")
		x.mu.Unlock()
		x.start(nil)
		x.idle()

		if n := x.count("[engineer] " + resumeFinal); n != 1 {
			t.Errorf("midCall=%v: reply printed %d times, want 1; printed:\n%s", midCall, n, x.out.String())
		}
		results := x.toolResults()
		x.mu.Lock()
		in, ran := x.toolIn["deploy"], x.toolRan["deploy"]
		x.mu.Unlock()
		if midCall {
			if in != 1 || ran != 0 {
				t.Errorf("interrupted approved call reached %d times, finished %d times; want 1 and 0", in, ran)
			}
			if len(results) != 1 || !strings.Contains(results[0], "interrupted by a restart") {
				t.Errorf("tool results the model got = %q, want the call reported interrupted", results)
			}
			if got := x.outcome(q); got != core.OutcomeInterrupted {
				t.Errorf("outcome = %q, want %q", got, core.OutcomeInterrupted)
			}
		} else {
			if in != 1 || ran != 1 {
				t.Errorf("approved call reached %d times, finished %d times; want exactly once", in, ran)
			}
			if len(results) != 1 || !strings.Contains(results[0], "deploy ok") {
				t.Errorf("tool results the model got = %q, want the call's result", results)
			}
			if got := x.outcome(q); got != core.OutcomeRan {
				t.Errorf("outcome = %q, want %q", got, core.OutcomeRan)
			}
		}
	}
}

// TestResumeAfterGracefulShutdown: a shutdown whose grace ends while a tool call
// runs stops the run without failing it; the next start resumes it, tells the
// model the call (not safe to repeat) was interrupted, and finishes the run.
func TestResumeAfterGracefulShutdown(t *testing.T) {
	x := newResumeRig(t, resumeTeam, twoTools)
	x.grace = 50 * time.Millisecond
	entered := make(chan struct{})
	x.hooks["tool:step_a"] = func(ctx context.Context) {
		x.mu.Lock()
		delete(x.hooks, "tool:step_a")
		x.mu.Unlock()
		close(entered)
		<-ctx.Done() // runs until the shutdown's grace ends
	}
	x.start(nil)
	x.say("please do both steps")
	select {
	case <-entered:
	case <-time.After(15 * time.Second):
		t.Fatal("step_a never started")
	}
	x.stop(x.cur)
	x.start(nil)
	x.idle()
	if n := x.count("[engineer] " + resumeFinal); n != 1 {
		t.Errorf("reply printed %d times, want 1; printed:\n%s", n, x.out.String())
	}
	if n := x.count("could not finish") + x.count("interrupted because openbot restarted"); n != 0 {
		t.Errorf("failure notices printed:\n%s", x.out.String())
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.toolIn["step_a"] != 1 || x.toolRan["step_a"] != 0 || x.toolRan["step_b"] != 1 {
		t.Errorf("step_a reached %d, finished %d; step_b finished %d", x.toolIn["step_a"], x.toolRan["step_a"], x.toolRan["step_b"])
	}
	if x.modelRan[0] != 1 || x.modelRan[1] != 1 || x.modelRan[2] != 1 {
		t.Errorf("model calls by step = %v, want each once", x.modelRan)
	}
}
