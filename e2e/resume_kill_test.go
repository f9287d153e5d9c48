package e2e

// A real kill (DESIGN.md §8): the engine runs in a child process (this test
// binary, re-executed) and is sent SIGKILL while a tool call is under way; a
// second child on the same bbolt file resumes the run.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/console"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
)

// Environment of the child engine process.
const (
	childEnv      = "OPENBOT_RESUME_CHILD" // set: run as the child
	childDB       = "OPENBOT_RESUME_DB"
	childModel    = "OPENBOT_RESUME_MODEL"
	childHook     = "OPENBOT_RESUME_HOOK" // tools call <hook>/<tool name>
	childSay      = "OPENBOT_RESUME_SAY"  // typed into the console at start
	childDeadline = 60 * time.Second
)

// TestResumeKillChild is the engine process of TestResumeAfterSIGKILL; it does
// nothing unless run as that test's child.
func TestResumeKillChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as the child of TestResumeAfterSIGKILL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()
	hook := os.Getenv(childHook)
	reg := agents.NewRegistry()
	for _, name := range []string{"step_a", "step_b"} {
		tl := &agents.FuncTool{ToolName: name, Desc: "does " + name, Repeatable: name == "step_b",
			Fn: func(ctx context.Context, _ agents.ToolCall) (string, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook+"/"+name, nil)
				if err != nil {
					return "", err
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return "", err
				}
				resp.Body.Close()
				return name + " ok", nil
			}}
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	ag, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: os.Getenv(childModel), APIKey: "test-key", Model: "test-model"}},
		Registry:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := openProc(t, os.Getenv(childDB), core.Options{Agent: ag, Bots: resumeTeam, Owners: []core.ActorID{console.Human}})
	pr, pw := io.Pipe()
	defer pw.Close()
	con, err := console.New(console.Options{Engine: p.eng, In: pr, Out: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	p.run(con)
	if say := os.Getenv(childSay); say != "" {
		if _, err := io.WriteString(pw, say+"\n"); err != nil {
			t.Fatal(err)
		}
		<-ctx.Done() // until the parent kills this process
		t.Fatal("not killed")
	}
	// The resumed run was queued by recovery before Ready.
	if err := p.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	p.stop()
}

// TestResumeAfterSIGKILL kills the engine process with SIGKILL while step_a
// (not safe to repeat) runs: the next process resumes the run, tells the model
// the call was interrupted, runs no finished model or tool call again, and
// posts the reply once.
func TestResumeAfterSIGKILL(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child does not spawn children")
	}
	srv := openaitest.New(t)
	var mu sync.Mutex
	steps := map[int]int{}
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		step := 0
		for _, m := range r.Body.Messages {
			if m.Role == "tool" {
				step++
			}
		}
		mu.Lock()
		steps[step]++
		mu.Unlock()
		return twoTools(step)
	})
	var child *exec.Cmd
	exited := make(chan struct{})
	hits := map[string]int{}
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		mu.Lock()
		hits[name]++
		first := name == "step_a" && hits[name] == 1
		victim := child
		mu.Unlock()
		if first {
			// step_a is under way in the child: kill it there, no goodbye.
			if err := victim.Process.Kill(); err != nil {
				t.Error(err)
			}
			<-exited
		}
	}))
	defer hooks.Close()
	db := filepath.Join(t.TempDir(), "openbot.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*childDeadline)
	defer cancel()
	spawn := func(say string, out *bytes.Buffer) *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestResumeKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", childDB+"="+db, childModel+"="+srv.URL(), childHook+"="+hooks.URL, childSay+"="+say)
		cmd.Stdout, cmd.Stderr = out, out
		return cmd
	}

	var first bytes.Buffer
	mu.Lock()
	child = spawn("please do both steps", &first)
	err := child.Start()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { werr <- child.Wait(); close(exited) }()
	select {
	case err := <-werr:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.String() != "signal: killed" {
			t.Fatalf("first child ended with %v, want killed; output:\n%s", err, first.String())
		}
	case <-ctx.Done():
		t.Fatalf("first child never reached step_a; output:\n%s", first.String())
	}

	var second bytes.Buffer
	if err := spawn("", &second).Run(); err != nil {
		t.Fatalf("second child: %v; output:\n%s", err, second.String())
	}

	out := second.String()
	if n := strings.Count(out, "[engineer] "+resumeFinal); n != 1 {
		t.Errorf("reply printed %d times, want 1; output:\n%s", n, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["step_a"] != 1 || hits["step_b"] != 1 {
		t.Errorf("tool calls reached = %v, want step_a and step_b once", hits)
	}
	if steps[0] != 1 || steps[1] != 1 || steps[2] != 1 {
		t.Errorf("model calls by step = %v, want each once", steps)
	}
	reqs := srv.Requests()
	var got string
	for _, m := range reqs[1].Body.Messages {
		if m.Role == "tool" {
			got = m.Content
		}
	}
	if !strings.Contains(got, "interrupted by a restart") {
		t.Errorf("step_a's result for the model = %q, want it reported interrupted", got)
	}
}
