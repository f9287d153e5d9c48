package agents_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
)

// waitFor polls cond (runtest.Poll) for what the engine signals to no one: a
// question stored, a tool's call reached, a delivery recorded.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	runtest.Poll(t, what, 15*time.Second, cond)
}

// TestApprovalSurvivesRestart: the engineer calls a tool that needs approval; the
// run pauses with its checkpoint in bolt; the process restarts; the click is
// answered by the new engine, the tool runs exactly once with the asked
// arguments and the reply is delivered.
func TestApprovalSurvivesRestart(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		last := r.Body.Messages[len(r.Body.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Text("deployed: " + last.Content)
		}
		return openaitest.Calls(openaitest.ToolCall{ID: "d1", Name: "deploy", Arguments: `{"env":"prod"}`})
	})
	var mu sync.Mutex
	var ran []string
	reg := agents.NewRegistry()
	if err := reg.Add(&agents.FuncTool{ToolName: "deploy", Fn: func(_ context.Context, c agents.ToolCall) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, string(c.Args))
		return "ok", nil
	}}); err != nil {
		t.Fatal(err)
	}
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"deploy"}, ApprovalTools: []string{"deploy"}}}
	agent := newAgent(t, srv, agents.Options{Registry: reg})
	path := filepath.Join(t.TempDir(), "openbot.db")

	first := startEngine(t, path, agent, bots)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first.ingest(t, ctx, "main", "1", "@engineer deploy to prod")
	q := first.firstQuestion(t, ctx)
	if q.Kind != core.QuestionApproval || q.Tool != "deploy" || string(q.Args) != `{"env":"prod"}` ||
		!strings.Contains(q.Text, "@engineer wants to run deploy") {
		t.Fatalf("question = %+v", q)
	}
	mu.Lock()
	n := len(ran)
	mu.Unlock()
	if n != 0 {
		t.Fatal("the tool ran before approval")
	}
	first.stop()

	second := startEngine(t, path, agent, bots)
	res, err := second.eng.Answer(ctx, core.Answer{Question: q.ID, Choice: core.ChoiceApprove, Actor: "console:you", Name: "you", Account: "console/local"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", res, err)
	}
	waitFor(t, "the reply", func() bool {
		for _, s := range second.ad.texts() {
			if strings.HasPrefix(s, "[engineer] deployed:") {
				return true
			}
		}
		return false
	})
	if err := second.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != `{"env":"prod"}` {
		t.Errorf("tool runs = %q, want one with the approved arguments", ran)
	}
	if again, _ := second.eng.Answer(ctx, core.Answer{Question: q.ID, Choice: core.ChoiceApprove, Actor: "console:you", Name: "you"}); again.Outcome != core.AnswerDecided {
		t.Errorf("second click = %+v, want already decided", again.Outcome)
	}
}
