package mcp

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// The whole stack across a restart (bbolt store, engine, agent, MCP manager):
// a question asked before the restart is approved right after it, while the
// MCP server is slow to start (or dead for good).

// printAdapter is a core.Adapter that records what it is asked to deliver.
type printAdapter struct {
	mu  sync.Mutex
	got []string
}

func (p *printAdapter) Account() core.AccountID { return "console/local" }
func (p *printAdapter) Bot() string             { return "*" }
func (p *printAdapter) Deliver(_ context.Context, d core.Delivery) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, d.Text)
	return fmt.Sprintf("p%d", len(p.got)), nil
}

// stack is one openbot process.
type stack struct {
	t     *testing.T
	store *bolt.Store
	reg   *agents.Registry
	eng   *core.Engine
	out   *printAdapter
	stop  func()
}

var countBot = core.BotProfile{Handle: "engineer", Name: "Engineer", Tools: []string{"alpha"}, ApprovalTools: []string{"alpha__count"}}

func startStack(t *testing.T, dbPath string, model *openaitest.Server, server ServerConfig) *stack {
	t.Helper()
	st, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, store: st, reg: agents.NewRegistry(), out: &printAdapter{}}
	m := NewManager(Options{Servers: []ServerConfig{server}, Registry: s.reg, CallTimeout: 10 * time.Second,
		RestartMin: time.Minute, RestartMax: time.Minute})
	a := newTestAgent(t, model, s.reg)
	s.eng, err = core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: a, Bots: []core.BotProfile{countBot},
		Approvers: []core.ActorID{"console:you"}, SelfApprove: true, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.eng.AddAdapter(s.out); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = m.Run(ctx) }()
	go func() { defer wg.Done(); _ = s.eng.Run(ctx) }()
	<-s.eng.Ready()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if err := st.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

func (s *stack) idle() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.eng.WaitIdle(ctx); err != nil {
		s.t.Fatalf("WaitIdle: %v; delivered: %q", err, s.out.got)
	}
}

func (s *stack) questions() []core.Question {
	s.t.Helper()
	qs, err := s.eng.Questions(context.Background(), false)
	if err != nil {
		s.t.Fatal(err)
	}
	return qs
}

func (s *stack) thread(id core.ThreadID) []core.Message {
	s.t.Helper()
	return storetest.Read(s.t, s.store, func(tx core.ReadTx) ([]core.Message, error) { return tx.Messages(id, 0, 0) })
}

// askBeforeRestart runs the first process until the engineer waits for
// approval of alpha__count, and returns the thread.
func askBeforeRestart(t *testing.T, dbPath, count string, model *openaitest.Server) core.ThreadID {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "gate")
	openGate(t, gate)
	s := startStack(t, dbPath, model, gatedServer(t, gate, count))
	model.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "alpha__count", Arguments: `{}`}))
	res, err := s.eng.Ingest(context.Background(), core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:1",
		ThreadKey: "console:main", Conversation: "main", PlatformID: "in1", SenderID: "console:you", SenderName: "you",
		Text: "@engineer count please", StartThread: true})
	if err != nil {
		t.Fatal(err)
	}
	s.idle()
	if qs := s.questions(); len(qs) != 1 || qs[0].Status != core.QuestionPending || qs[0].Tool != "alpha__count" {
		t.Fatalf("questions before the restart = %+v", qs)
	}
	s.stop()
	return res.Thread
}

func approve(t *testing.T, s *stack) {
	t.Helper()
	qs := s.questions()
	r, err := s.eng.Answer(context.Background(), core.Answer{Question: qs[0].ID, Choice: core.ChoiceApprove, Actor: "console:you", Name: "You", Account: "console/local"})
	if err != nil || r.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", r, err)
	}
}

func TestApprovalRightAfterRestartWithSlowServer(t *testing.T) {
	dir := t.TempDir()
	db, count := filepath.Join(dir, "openbot.db"), filepath.Join(dir, "count")
	model := openaitest.New(t)
	thread := askBeforeRestart(t, db, count, model)

	gate := filepath.Join(dir, "gate2")
	s := startStack(t, db, model, gatedServer(t, gate, count))
	model.Enqueue(openaitest.Text("Counted once."))
	approve(t, s)
	waitWaiting(t, "the resumed run to wait for alpha", s.reg, 1)
	openGate(t, gate)
	s.idle()
	if n := lines(t, count); n != 1 {
		t.Fatalf("the approved tool ran %d times, want exactly 1", n)
	}
	if qs := s.questions(); qs[0].Decision() != "Approved by You" || qs[0].Outcome != core.OutcomeRan {
		t.Fatalf("question = %q, outcome %q", qs[0].Decision(), qs[0].Outcome)
	}
	ms := s.thread(thread)
	if last := ms[len(ms)-1]; last.Text != "Counted once." {
		t.Fatalf("last message = %+v", last)
	}
}

func TestApprovalRightAfterRestartWithDeadServer(t *testing.T) {
	dir := t.TempDir()
	db, count := filepath.Join(dir, "openbot.db"), filepath.Join(dir, "count")
	model := openaitest.New(t)
	thread := askBeforeRestart(t, db, count, model)

	s := startStack(t, db, model, stdioServer(t, "alpha", "exit", nil))
	model.Enqueue(openaitest.Text("I could not count."))
	approve(t, s)
	s.idle()
	if n := lines(t, count); n != 0 {
		t.Fatalf("the tool ran %d times on a dead server", n)
	}
	why := "MCP server alpha is not available: it exited with status 2"
	if qs := s.questions(); qs[0].Outcome != "not run: "+why+" (its error output is in the openbot log)" {
		t.Fatalf("outcome = %q", qs[0].Outcome)
	}
	var noticed bool
	for _, m := range s.thread(thread) {
		if m.Kind == core.KindNotice && strings.Contains(m.Text, "approved call of alpha__count") && strings.Contains(m.Text, why) {
			noticed = true
		}
	}
	if !noticed {
		t.Fatalf("no notice of the call that did not run; thread: %+v", s.thread(thread))
	}
}
