package e2e

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
	"openbot/internal/runtest"
)

// Helpers shared by the end-to-end tests of every platform: scripted and
// streaming agents, clocks, polling, and small readers of the store. A
// platform's own rig (how to start its fake and its adapter) stays with that
// platform's tests.

// syncBuffer is an io.Writer safe for the console's concurrent Deliver calls;
// WaitFor waits for what it was written.
type syncBuffer = runtest.Buffer

// blocks returns the printed reply blocks, one per "[handle] ..." line.
func blocks(s *syncBuffer) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if strings.HasPrefix(l, "[") || strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// botOf tells which bot a request is for from its system prompt's identity line.
func botOf(r openaitest.Request) string {
	sys := r.Body.Messages[0].Content
	for _, b := range e2eTeam {
		if strings.Contains(sys, "(@"+b.Handle+")") {
			return b.Handle
		}
	}
	return ""
}

// lastUser is the text of the last user message of a request.
func lastUser(r openaitest.Request) string {
	ms := r.Body.Messages
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "user" {
			return ms[i].Content
		}
	}
	return ""
}

// noteAgent answers "<handle> on it"; a trigger containing "note" first posts the
// note "progress note for: <text>" (post_message), and one containing "ask" pauses
// with a free-text question. A resumed run answers "thanks".
type noteAgent struct {
	mu   sync.Mutex
	runs int
}

func (a *noteAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	a.mu.Lock()
	a.runs++
	a.mu.Unlock()
	if job.Resume != nil {
		return core.Result{Reply: "thanks"}, nil
	}
	last := job.Triggers[len(job.Triggers)-1].Text
	switch {
	case strings.Contains(last, "note"):
		if _, err := job.Env.Post(ctx, "progress note for: "+last); err != nil {
			return core.Result{}, err
		}
	case strings.Contains(last, "ask"):
		return core.Result{Pause: &core.Pause{Kind: core.QuestionAsk, Text: "Which environment?", CallID: "call-1"},
			Checkpoint: json.RawMessage(`[]`)}, nil
	}
	return core.Result{Reply: job.Bot.Handle + " on it"}, nil
}

func (a *noteAgent) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs
}

// scripted answers runs per bot handle; unscripted bots say "<handle> done".
type scripted struct {
	mu    sync.Mutex
	fn    map[string]func(*core.Job) string
	calls map[string][]*core.Job
}

func (s *scripted) Execute(_ context.Context, job *core.Job) (core.Result, error) {
	s.mu.Lock()
	s.calls[job.Bot.Handle] = append(s.calls[job.Bot.Handle], job)
	f := s.fn[job.Bot.Handle]
	s.mu.Unlock()
	if f == nil {
		return core.Result{Reply: job.Bot.Handle + " done"}, nil
	}
	return core.Result{Reply: f(job)}, nil
}

func (s *scripted) runs(h string) []*core.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[h]
}

// blockEngineer makes the engineer's runs signal entered and wait for release.
func blockEngineer() (map[string]func(*core.Job) string, chan struct{}, chan struct{}) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	return map[string]func(*core.Job) string{"engineer": func(*core.Job) string {
		entered <- struct{}{}
		<-release
		return "engineer finished"
	}}, entered, release
}

// runStatuses lists the statuses of every run, oldest first.
func runStatuses(t *testing.T, st core.Store) []core.RunStatus {
	t.Helper()
	var out []core.RunStatus
	if err := st.View(context.Background(), func(tx core.ReadTx) error {
		rs, err := tx.RunsBefore(0, 100)
		for i := len(rs) - 1; i >= 0; i-- {
			out = append(out, rs[i].Status)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// streamScript is what a streaming test agent does in a run: it shows text
// through ts and returns the reply.
type streamScript func(ctx context.Context, ts core.TextStreamer) (string, error)

// streamAgent runs streamScript for every run (core.Agent).
type streamAgent struct{ script streamScript }

func (a *streamAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	ts, ok := job.Env.(core.TextStreamer)
	if !ok {
		return core.Result{}, errors.New("the run env does not stream")
	}
	reply, err := a.script(ctx, ts)
	return core.Result{Reply: reply}, err
}

// stepClock is a core.Clock the test moves on.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock() *stepClock { return &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// until waits for cond. With a clock, it moves the clock on by step between
// checks: a stream edits again only once its interval passed on the clock.
func until(ctx context.Context, clock *stepClock, step time.Duration, what string, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + what)
		case <-t.C:
		}
		if clock != nil {
			clock.advance(step)
		}
	}
	return nil
}

// firstPost moves clock on by one stream interval (a stream's first post waits
// one) and then, the clock standing still, waits until cond says it is out.
func firstPost(ctx context.Context, clock *stepClock, what string, cond func() bool) error {
	clock.advance(time.Second)
	return until(ctx, nil, 0, what, cond)
}

// fixedAgent answers every run with "<handle> on it".
type fixedAgent struct {
	mu   sync.Mutex
	runs map[string]int
}

func (f *fixedAgent) Execute(_ context.Context, job *core.Job) (core.Result, error) {
	f.mu.Lock()
	f.runs[job.Bot.Handle]++
	f.mu.Unlock()
	return core.Result{Reply: job.Bot.Handle + " on it"}, nil
}

// wantToolResult checks that the model's last request ends with a tool result
// containing want (what an approval, expiry or answer handed back to the run).
func wantToolResult(t *testing.T, llm *openaitest.Server, want string) {
	t.Helper()
	reqs := llm.Requests()
	last := reqs[len(reqs)-1].Body.Messages
	if tm := last[len(last)-1]; tm.Role != "tool" || !strings.Contains(tm.Content, want) {
		t.Fatalf("the model's last request ends with %s %q, want a tool result with %q", tm.Role, tm.Content, want)
	}
}
