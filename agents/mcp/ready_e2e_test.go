package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
)

// No run starts before the tools it may call exist (DESIGN.md §6): these tests
// start the agent while the MCP server is still starting, or dead for good.

// runManager runs a Manager publishing into reg until the test ends.
func runManager(t *testing.T, reg *agents.Registry, servers ...ServerConfig) *Manager {
	t.Helper()
	m := NewManager(Options{Servers: servers, Registry: reg, CallTimeout: 10 * time.Second,
		RestartMin: time.Minute, RestartMax: time.Minute})
	runtest.Start(t, m.Run)
	return m
}

func newTestAgent(t *testing.T, model *openaitest.Server, reg *agents.Registry) *agents.Agent {
	t.Helper()
	a, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: model.URL(), APIKey: "sk-test", Model: "fake-model"}},
		Registry:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitWaiting waits until n runs wait for a tool source of reg (20 s at most).
func waitWaiting(t *testing.T, what string, reg *agents.Registry, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := reg.WaitWaiting(ctx, n); err != nil {
		t.Fatalf("timed out waiting for %s: %d waiting", what, reg.Waiting())
	}
}

// executeAsync runs a.Execute in a goroutine owned by the test.
func executeAsync(a *agents.Agent, job *core.Job) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := a.Execute(ctx, job)
		ch <- result{res, err}
	}()
	return ch
}

type result struct {
	res core.Result
	err error
}

// gatedServer is the "gated" stdio server: it serves once openGate(gate) was
// called, blocked until then opening the gate, a named pipe, for reading.
func gatedServer(t *testing.T, gate, count string) ServerConfig {
	makeGate(t, gate)
	return stdioServer(t, "alpha", "gated", map[string]string{envGate: gate, envCount: count})
}

// makeGate makes the named pipe at path, closed, if it is not there yet.
func makeGate(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openGate opens the gate at path for good: the test holds a writer open until
// it ends, so every open for reading returns at once, now and after restarts.
func openGate(t *testing.T, path string) {
	t.Helper()
	makeGate(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0) // does not wait for a reader
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestRunWaitsForServerStillStarting(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	reg := agents.NewRegistry()
	runManager(t, reg, gatedServer(t, gate, filepath.Join(dir, "count")))
	model := openaitest.New(t)
	a := newTestAgent(t, model, reg)
	model.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "alpha__echo", Arguments: `{"text":"early"}`}),
		openaitest.Text("done"),
	)
	bot := core.BotProfile{Handle: "engineer", Tools: []string{"alpha__*"}}
	env := &threadEnv{}
	done := executeAsync(a, newJob(env, bot))
	// The run is waiting for alpha, which is still starting; nothing went to
	// the model yet. Then alpha becomes ready.
	waitWaiting(t, "the run to wait for alpha", reg, 1)
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model was called %d times before alpha was ready", n)
	}
	openGate(t, gate)
	r := <-done
	if r.err != nil || r.res.Reply != "done" {
		t.Fatalf("Execute = %q, %v", r.res.Reply, r.err)
	}
	reqs := model.Requests()
	if !containsName(reqs[0].ToolNames(), "alpha__echo") {
		t.Fatalf("first request offers %v, want alpha__echo", reqs[0].ToolNames())
	}
	msgs := reqs[1].Body.Messages
	if last := msgs[len(msgs)-1]; !strings.Contains(last.Content, "echo: early") {
		t.Fatalf("tool result = %q", last.Content)
	}
	if len(env.notices) != 0 {
		t.Fatalf("notices = %q, want none", env.notices)
	}
}

func containsName(names []string, want string) bool {
	for _, n := range names {
		if n == want {
			return true
		}
	}
	return false
}

// newJob is a fresh run of bot on a thread with one message for it.
func newJob(env *threadEnv, bot core.BotProfile) *core.Job {
	alice := core.ActorID("slack:T1:U1")
	trig := env.add(alice, "Alice", "@"+bot.Handle+" please count", bot.Handle)
	return &core.Job{
		Run:          core.Run{ID: 1, Bot: bot.ID(), Thread: 1},
		Bot:          bot,
		Thread:       core.Thread{ID: 1, Bindings: []core.Binding{{Platform: "slack"}}},
		Triggers:     []core.Message{trig},
		Roster:       []core.BotProfile{bot},
		DefaultBot:   bot.Handle,
		Participants: []core.Actor{{ID: alice, Kind: core.ActorHuman, Name: "Alice"}},
		Env:          env,
	}
}

// pausedForCount runs bot until it pauses for approval of alpha__count, with
// a server that is up, and returns the approved question and the job to resume.
func pausedForCount(t *testing.T, bot core.BotProfile, count string) *core.Job {
	t.Helper()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	openGate(t, gate)
	reg := agents.NewRegistry()
	runManager(t, reg, gatedServer(t, gate, count))
	model := openaitest.New(t)
	a := newTestAgent(t, model, reg)
	model.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "alpha__count", Arguments: `{}`}))
	env := &threadEnv{}
	job := newJob(env, bot)
	r := <-executeAsync(a, job)
	if r.err != nil || r.res.Pause == nil || r.res.Pause.Tool != "alpha__count" {
		t.Fatalf("first segment = %+v, %v; want a pause for alpha__count", r.res, r.err)
	}
	p := r.res.Pause
	job.Run.Checkpoint = r.res.Checkpoint
	job.Run.Status = core.RunWaitingHuman
	job.Resume = &core.Question{ID: 7, Kind: core.QuestionApproval, Run: job.Run.ID, Tool: p.Tool, Args: p.Args, CallID: p.CallID,
		Status: core.QuestionAnswered, Choice: core.ChoiceApprove, Answer: "Approve", AnsweredBy: "slack:T1:U1", AnsweredByName: "Alice"}
	return job
}

// An approval given right after a restart, with the server slow to start: the
// resumed run waits for the server and the approved call runs exactly once.
func TestApprovedCallAfterRestartRunsOnce(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	bot := core.BotProfile{Handle: "engineer", Tools: []string{"alpha"}, ApprovalTools: []string{"alpha__count"}}
	job := pausedForCount(t, bot, count)

	// "Restart": a new registry, manager and agent; the server is slow to start.
	gate := filepath.Join(t.TempDir(), "gate")
	reg := agents.NewRegistry()
	runManager(t, reg, gatedServer(t, gate, count))
	model := openaitest.New(t)
	a := newTestAgent(t, model, reg)
	model.Enqueue(openaitest.Text("counted once"))
	env := &threadEnv{}
	job.Env = env
	done := executeAsync(a, job)
	waitWaiting(t, "the resumed run to wait for alpha", reg, 1)
	openGate(t, gate)
	r := <-done
	if r.err != nil || r.res.Reply != "counted once" {
		t.Fatalf("resumed Execute = %q, %v", r.res.Reply, r.err)
	}
	if n := lines(t, count); n != 1 {
		t.Fatalf("the approved tool ran %d times, want exactly 1", n)
	}
	if got := env.outcomes[7]; got != core.OutcomeRan {
		t.Fatalf("outcome = %q, want %q", got, core.OutcomeRan)
	}
	msgs := model.Requests()[0].Body.Messages
	if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.Contains(last.Content, "counted") {
		t.Fatalf("tool result = %+v", last)
	}
}

// A server dead for good: the run is told in the thread, the approved call
// does not run, the model hears why, and the question's outcome says so.
func TestApprovedCallServerDeadIsNoticedAndRecorded(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	bot := core.BotProfile{Handle: "engineer", Tools: []string{"alpha"}, ApprovalTools: []string{"alpha__count"}}
	job := pausedForCount(t, bot, count)

	reg := agents.NewRegistry()
	runManager(t, reg, stdioServer(t, "alpha", "exit", nil))
	model := openaitest.New(t)
	a := newTestAgent(t, model, reg)
	model.Enqueue(openaitest.Text("I could not count."))
	env := &threadEnv{}
	job.Env = env
	r := <-executeAsync(a, job)
	if r.err != nil {
		t.Fatalf("resumed Execute: %v", r.err)
	}
	if n := lines(t, count); n != 0 {
		t.Fatalf("the tool ran %d times on a dead server", n)
	}
	wantWhy := "MCP server alpha is not available: it exited with status 2"
	var server, call bool
	for _, n := range env.notices {
		server = server || strings.HasPrefix(n, wantWhy)
		call = call || strings.Contains(n, "approved call of alpha__count (question 7) did not run: "+wantWhy)
		if strings.Contains(n, "MYSERVICE_TOKEN") {
			t.Errorf("notice shows the server's stderr: %q", n)
		}
	}
	if !server || !call {
		t.Fatalf("notices = %q, want the server and the call reported", env.notices)
	}
	if got := env.outcomes[7]; !strings.HasPrefix(got, "not run: "+wantWhy) {
		t.Fatalf("outcome = %q", got)
	}
	msgs := model.Requests()[0].Body.Messages
	if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.Contains(last.Content, "could not run: "+wantWhy) {
		t.Fatalf("tool result for the model = %+v", last)
	}
}

// A result over every cap reaches the model with a note of its real size.
func TestHugeResultNoteStatesRealSize(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	openGate(t, gate)
	reg := agents.NewRegistry()
	runManager(t, reg, gatedServer(t, gate, filepath.Join(t.TempDir(), "count")))
	model := openaitest.New(t)
	a := newTestAgent(t, model, reg)
	model.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "alpha__huge", Arguments: `{}`}), openaitest.Text("big"))
	env := &threadEnv{}
	if r := <-executeAsync(a, newJob(env, core.BotProfile{Handle: "engineer", Tools: []string{"alpha"}})); r.err != nil {
		t.Fatal(r.err)
	}
	msgs := model.Requests()[1].Body.Messages
	last := msgs[len(msgs)-1].Content
	if !strings.Contains(last, "of 100000 bytes") || len(last) > agents.DefaultMaxToolResultChars+200 {
		t.Fatalf("tool result (%d bytes) ends %q, want a note of the real size (100000 bytes)", len(last), last[max(0, len(last)-200):])
	}
	if ev := env.event("tool_call"); ev == nil {
		t.Fatal("no tool_call event")
	}
}
