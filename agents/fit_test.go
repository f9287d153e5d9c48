package agents

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestChatFittedShrinksText: reflection's and compaction's calls cut their
// text to the context window before sending, and cut it again on each
// context-length error; the head stays whole.
func TestChatFittedShrinksText(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if len(r.Raw) > 12000 {
			return openaitest.ContextLengthError()
		}
		return openaitest.Text("ok")
	})
	a := newAgent(t, srv, nil, nil)
	pc := a.clients["default"]
	text := strings.Repeat("old words ", 10000) + "NEWEST"
	chain := []link{{pc: pc, model: "fake-model"}}
	ans, _, err := chatFitted(context.Background(), a, chain, chief, "system", "HEAD\n", text)
	if err != nil || ans.Text != "ok" {
		t.Fatalf("answer %+v, err %v", ans, err)
	}
	reqs := srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("requests = %d, want a refused one and a shorter one", len(reqs))
	}
	last := openaitest.LastUserText(reqs[len(reqs)-1])
	if !strings.HasPrefix(last, "HEAD\n") || !strings.HasSuffix(last, "NEWEST") {
		t.Errorf("the head or the newest text was cut: %.60q ... %q", last, last[len(last)-20:])
	}

	// With the window known, the first request already fits.
	srv.Forget()
	pc.prov.ContextWindow = 3000
	if _, _, err := chatFitted(context.Background(), a, chain, chief, "system", "HEAD\n", text); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || len(reqs[0].Raw)/4 > 3000 {
		t.Errorf("requests = %d (first %d bytes), want one that fits", len(reqs), len(reqs[0].Raw))
	}
}

// TestContextEditingStubsOldToolResults: ten reads of a 20 KB file in one
// run. Once the results pass the trigger, every result but the newest steps'
// becomes a one-line stub that names the call and how to get it back; each
// tool result still follows its call, and the trigger is untouched.
func TestContextEditingStubsOldToolResults(t *testing.T) {
	srv := openaitest.New(t)
	steps := 0
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if steps < 10 {
			steps++
			return openaitest.Calls(openaitest.Call("read_file", `{"path":"/work/f`+string(rune('0'+steps-1))+`.txt"}`))
		}
		return openaitest.Text("done")
	})
	reg := NewRegistry()
	file := strings.Repeat("0123456789abcdefghij\n", 1000)
	if err := reg.Add(&FuncTool{ToolName: "read_file", Repeatable: true,
		Fn: func(context.Context, ToolCall) (string, error) { return file, nil }}); err != nil {
		t.Fatal(err)
	}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "read all ten files and tell me "+strings.Repeat("why ", 100))
	bot := chief
	bot.Tools = []string{"read_file"}
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	total := 0
	for _, r := range reqs {
		total += len(r.Raw) / 4
	}
	last := reqs[len(reqs)-1].Body.Messages
	stubs, whole := 0, 0
	ids := map[string]bool{}
	for _, m := range last {
		for _, c := range m.ToolCalls {
			ids[c.ID] = true
		}
		if m.Role != "tool" {
			continue
		}
		if !ids[m.ToolCallID] {
			t.Errorf("tool result %s before its call", m.ToolCallID)
		}
		switch {
		case strings.HasPrefix(m.Content, stubPrefix):
			stubs++
			if !strings.Contains(m.Content, `read_file({"path":"/work/f`) || !strings.Contains(m.Content, "again") || strings.Count(m.Content, "\n") > 0 {
				t.Errorf("stub = %q, want one line naming the call and how to get it back", m.Content)
			}
		default:
			whole++
		}
	}
	if stubs < 6 || whole < editKeepSteps {
		t.Errorf("stubs %d, whole results %d; want the old ones stubbed and the newest %d kept", stubs, whole, editKeepSteps)
	}
	if !strings.Contains(openaitest.LastUserText(reqs[len(reqs)-1]), "read all ten files and tell me "+strings.Repeat("why ", 100)) {
		t.Error("the trigger was edited")
	}
	t.Logf("input tokens over the run: %d in %d calls", total, len(reqs))
	if total > 150000 {
		t.Errorf("input tokens over the run = %d, want far below the 272k of sending every result every time", total)
	}
}

// TestHistoryBudgetOnLargeWindow: on a 200k window the history share (half
// of it) would carry a 60k-token thread whole on every call; the history
// stays within limits.history_token_budget (24k by default) unless that is
// raised.
func TestHistoryBudgetOnLargeWindow(t *testing.T) {
	const window = 200000
	for _, tc := range []struct {
		budget   int // Limits.HistoryTokenBudget, 0: default
		min, max int // the request's tokens
	}{
		{0, 20000, 26000},
		{100000, 55000, 70000},
	} {
		srv := openaitest.New(t)
		srv.Enqueue(openaitest.Text("ok"))
		a := newAgent(t, srv, nil, func(o *Options) {
			p := o.Providers["default"]
			p.ContextWindow = window
			o.Providers["default"] = p
			o.Limits.HistoryTokenBudget = tc.budget
		})
		env := &fakeEnv{}
		for i := range 30 {
			env.add(alice, "Alice", fmt.Sprintf("point %d: %s", i, strings.Repeat("a long paste ", 300)))
			env.add(chief.ID(), "Chief", fmt.Sprintf("answer %d: %s", i, strings.Repeat("a long answer ", 280)))
		}
		trig := env.add(alice, "Alice", "and now?")
		if _, err := execute(t, a, newJob(env, chief, false, trig)); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if n := len(reqs[0].Raw) / 4; n < tc.min || n > tc.max {
			t.Errorf("history_token_budget %d: the request has %d tokens, want %d to %d", tc.budget, n, tc.min, tc.max)
		}
	}
}
