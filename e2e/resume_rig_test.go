package e2e

// The rig of the end-to-end resume tests (DESIGN.md §8): the console
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
	// atSettle, when set, kills before the write that completes a run commits
	// (the settle, which carries the last model call: core.Result.Step).
	atSettle atomic.Bool
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
	if r.Status == core.RunCompleted && t.s.atSettle.Load() {
		t.s.kill()
		return r, errKilled
	}
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

// resumeEngine is one running engine of a rig, on the rig's file behind a
// killStore.
type resumeEngine struct {
	*proc
	st *killStore
	in *io.PipeWriter
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
	e.proc = openProc(t, "", core.Options{Store: e.st, Agent: llmAgent(t, x.srv, reg, core.Limits{}), Bots: x.team, Limits: x.limits,
		ShutdownGrace: x.grace, Owners: []core.ActorID{console.Human}}) // as in openbot chat: the terminal's person is an owner
	pr, pw := io.Pipe()
	e.in = pw
	con, err := console.New(console.Options{Engine: e.eng, In: pr, Out: x.out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.stop(e) })
	e.run(con)
}

// stop closes an engine's console and stops it (once).
func (x *resumeRig) stop(e *resumeEngine) {
	e.in.Close()
	e.proc.stop()
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

// wantOneReply checks the final reply was printed once and no failure notice
// at all: the restart resumed the run, it did not fail or repeat it.
func (x *resumeRig) wantOneReply() {
	x.t.Helper()
	if n := x.count("[engineer] " + resumeFinal); n != 1 {
		x.t.Errorf("reply printed %d times, want 1; printed:\n%s", n, x.out.String())
	}
	if n := x.count("could not finish") + x.count("interrupted because openbot restarted"); n != 0 {
		x.t.Errorf("failure notices printed:\n%s", x.out.String())
	}
}

// count is how many printed blocks contain s.
func (x *resumeRig) count(s string) int {
	n := 0
	for _, b := range blocks(x.out) {
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
