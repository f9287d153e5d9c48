package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/agentstest"
	"openbot/agents/openaitest"
	"openbot/core"
)

func systemText(t *testing.T, r openaitest.Request) string {
	t.Helper()
	if len(r.Body.Messages) == 0 || r.Body.Messages[0].Role != "system" {
		t.Fatalf("first message is not the system prompt: %+v", r.Body.Messages)
	}
	return promptText(r)
}

// promptText is the text of a request's prompt that the bot's rules and the
// turn's context are in: the system prompt and the newest user message
// (turnContext).
func promptText(r openaitest.Request) string {
	var parts []string
	for _, m := range r.Body.Messages {
		if m.Role == "system" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(append(parts, openaitest.LastUserText(r)), "\n")
}

func TestStreamingTextReply(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Reply{Text: "Hello Alice, on it.", Usage: openaitest.Usage{PromptTokens: 100, CompletionTokens: 9}})
	env := &fakeEnv{}
	env.add(alice, "Alice", "earlier question")
	env.add(chief.ID(), "Chief", "earlier answer")
	trig := env.add(alice, "Alice", "@chief please plan the release", "chief")
	a := newAgent(t, srv, nil, nil)

	res, err := execute(t, a, newJob(env, chief, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "Hello Alice, on it." {
		t.Errorf("reply = %q", res.Reply)
	}
	if want := (core.Usage{PromptTokens: 100, CompletionTokens: 9, ModelCalls: 1}); res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	req := reqs[0]
	if !req.Body.Stream || req.Body.Model != "fake-model" {
		t.Errorf("stream = %v, model = %q", req.Body.Stream, req.Body.Model)
	}
	if got := req.Header.Get("X-Team"); got != "openbot" {
		t.Errorf("custom header X-Team = %q", got)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	sys := systemText(t, req)
	for _, want := range []string{
		"You are Chief (@chief)", "Coordinates the team.", "Split work and delegate.",
		"@engineer (Engineer): Writes code.", "@reviewer (Reviewer): Reviews PRs.",
		"(new)", "untrusted", "self-contained", "without an @mention ends the exchange",
		"Alice (person)", "@chief",
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	// The order of the seed: identity, instructions, platform rules, roster.
	if i, j := strings.Index(sys, "Split work"), strings.Index(sys, "# How this thread works"); i > j {
		t.Errorf("instructions come after the platform rules")
	}
	if i, j := strings.Index(sys, "# How this thread works"), strings.Index(sys, "# Other bots"); i > j {
		t.Errorf("roster comes before the platform rules")
	}
	msgs := req.Body.Messages[1:]
	if len(msgs) != 3 {
		t.Fatalf("history = %+v, want user, assistant, user", msgs)
	}
	if msgs[0].Role != "user" || !strings.Contains(msgs[0].Content, "[Alice]: <untrusted") || !strings.Contains(msgs[0].Content, "earlier question") {
		t.Errorf("first history message = %+v", msgs[0])
	}
	if msgs[1].Role != "assistant" || msgs[1].Content != "earlier answer" {
		t.Errorf("own message = %+v, want assistant", msgs[1])
	}
	if !strings.Contains(msgs[2].Content, "[Alice] (new): ") || !strings.Contains(msgs[2].Content, "plan the release") {
		t.Errorf("trigger = %q, want it marked (new)", msgs[2].Content)
	}
	if types := env.eventTypes(); !slices.Equal(types, []string{"model_call"}) {
		t.Errorf("events = %v", types)
	}
	if ev := env.Events[0].Payload; ev["prompt_tokens"] != float64(100) || ev["completion_tokens"] != float64(9) {
		t.Errorf("model_call event = %v", ev)
	}
	if len(env.Checkpoints) != 2 {
		t.Errorf("checkpoints = %d, want 2 (at the start, after the answer)", len(env.Checkpoints))
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{"key":"answer"}`}),
		openaitest.Text("The answer is 42."),
	)
	var gotArgs atomic.Value
	reg := NewRegistry()
	if err := reg.Add(&FuncTool{ToolName: "lookup", Desc: "look a key up",
		Params: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
		Fn: func(_ context.Context, c ToolCall) (string, error) {
			gotArgs.Store(string(c.Args))
			if c.Env == nil || c.Run != 7 || c.Thread != 1 || c.Bot.Handle != "engineer" {
				return "", fmt.Errorf("bad call context %+v", c)
			}
			return "42", nil
		}}); err != nil {
		t.Fatal(err)
	}
	bot := engineer
	bot.Tools = []string{"lookup"}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer what is the answer?", "engineer")
	a := newAgent(t, srv, reg, nil)

	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "The answer is 42." || res.Usage.ModelCalls != 2 {
		t.Errorf("result = %+v", res)
	}
	if got := gotArgs.Load(); got != `{"key":"answer"}` {
		t.Errorf("tool args = %v", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	if got, want := reqs[0].ToolNames(), []string{"lookup", ReadHistoryName, RecallMessagesName, AskHumanName}; !slices.Equal(got, want) {
		t.Errorf("tools offered = %v, want %v", got, want)
	}
	params, _ := json.Marshal(reqs[0].Body.Tools[0].Function.Parameters)
	if !strings.Contains(string(params), `"required":["key"]`) {
		t.Errorf("schema not passed through: %s", params)
	}
	second := reqs[1].Body.Messages
	last := second[len(second)-1]
	if last.Role != "tool" || last.ToolCallID != "c1" || !strings.Contains(last.Content, `<untrusted source="tool:lookup">42</untrusted>`) {
		t.Errorf("tool result message = %+v", last)
	}
	call := second[len(second)-2]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].Function.Name != "lookup" {
		t.Errorf("assistant tool call message = %+v", call)
	}
	if types := env.eventTypes(); !slices.Equal(types, []string{"model_call", "tool_call", "tool_result", "model_call"}) {
		t.Errorf("events = %v", types)
	}
	if len(env.Checkpoints) != 5 {
		t.Errorf("checkpoints = %d, want 5 (start, answer, tool started, tool done, answer)", len(env.Checkpoints))
	}
	var cp checkpointData
	if err := json.Unmarshal(env.Checkpoints[len(env.Checkpoints)-1], &cp); err != nil || len(cp.Transcript) != 3 || cp.Usage.ModelCalls != 2 {
		t.Errorf("last checkpoint = %+v, %v", cp, err)
	}
}

// TestAssistantContentPresent checks that the raw request carries "content":"" on an
// assistant message that only has tool calls; go-openai alone omits it.
func TestAssistantContentPresent(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.Call(ReadHistoryName, `{}`)), openaitest.Text("done"))
	if _, _, err := hiFromAlice(t, newAgent(t, srv, nil, nil)); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d", len(reqs))
	}
	found := false
	for _, m := range reqs[1].Messages() {
		if m["role"] != "assistant" || m["tool_calls"] == nil {
			continue
		}
		found = true
		c, ok := m["content"]
		if !ok || c != "" {
			t.Errorf(`assistant tool-call message content = %#v (present %v), want ""`, c, ok)
		}
	}
	if !found {
		t.Fatal("no assistant tool-call message in the second request")
	}
	if !strings.Contains(string(reqs[1].Raw), `"content":""`) {
		t.Errorf(`raw body lacks "content":"": %s`, reqs[1].Raw)
	}
}

func TestPatchAssistantContent(t *testing.T) {
	// What go-openai itself writes for a tool-call-only message.
	raw, err := json.Marshal(openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{
		{Role: "user", Content: "x"},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "a", Type: "function", Function: openai.FunctionCall{Name: "f", Arguments: "{}"}}}},
		{Role: "assistant", Content: "kept"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"content":""`) {
		t.Skip("go-openai now writes empty content itself; the patch is a no-op")
	}
	var got struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(patchAssistantContent(raw), &got); err != nil {
		t.Fatal(err)
	}
	if c, ok := got.Messages[1]["content"]; !ok || c != "" {
		t.Errorf("patched content = %#v", got.Messages[1])
	}
	if got.Messages[2]["content"] != "kept" || got.Messages[0]["content"] != "x" {
		t.Errorf("other messages changed: %v", got.Messages)
	}
	if string(patchAssistantContent([]byte("not json"))) != "not json" {
		t.Error("unparsable body should pass unchanged")
	}
}

// TestPatchAssistantContentSkipsFirstRequest: a request with no assistant
// message, every run's first, is passed on without being parsed (it is on the
// event -> model request path), even when a user's text quotes the role.
func TestPatchAssistantContentSkipsFirstRequest(t *testing.T) {
	raw, err := json.Marshal(openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: `say {"role":"assistant"} back`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { patchAssistantContent(raw) }); n != 0 {
		t.Errorf("a first request cost %v allocations, want none: it was parsed", n)
	}
	if got := patchAssistantContent(raw); string(got) != string(raw) {
		t.Errorf("first request changed:\n%s\nwant\n%s", got, raw)
	}
}

func TestInterleavedToolCalls(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Reply{Interleave: true, ToolCalls: []openaitest.ToolCall{
		{ID: "a", Name: "note", Arguments: `{"text":"first call text"}`},
		{ID: "b", Name: "note", Arguments: `{"text":"second"}`},
	}}, openaitest.Text("ok"))
	var mu sync.Mutex
	var got []string
	reg := NewRegistry()
	_ = reg.Add(&FuncTool{ToolName: "note", Fn: func(_ context.Context, c ToolCall) (string, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(c.Args, &a); err != nil {
			return "", err
		}
		mu.Lock()
		got = append(got, a.Text)
		mu.Unlock()
		return "noted " + a.Text, nil
	}})
	bot := engineer
	bot.Tools = []string{"note"}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "take notes")
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"first call text", "second"}) {
		t.Errorf("tool received %q, want both complete calls", got)
	}
	msgs := srv.Requests()[1].Body.Messages
	tail := msgs[len(msgs)-3:]
	if len(tail[0].ToolCalls) != 2 || tail[0].ToolCalls[0].ID != "a" || tail[0].ToolCalls[1].ID != "b" {
		t.Fatalf("assistant message = %+v", tail[0])
	}
	if tail[1].ToolCallID != "a" || !strings.Contains(tail[1].Content, "first call text") ||
		tail[2].ToolCallID != "b" || !strings.Contains(tail[2].Content, "noted second") {
		t.Errorf("tool results out of call order: %+v", tail[1:])
	}
}

func TestParallelToolCallsRunConcurrently(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.Call("barrier", `{}`), openaitest.Call("barrier", `{}`)), openaitest.Text("both done"))
	var arrived sync.WaitGroup
	arrived.Add(2)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	reg := NewRegistry()
	_ = reg.Add(&FuncTool{ToolName: "barrier", Fn: func(ctx context.Context, _ ToolCall) (string, error) {
		arrived.Done()
		select {
		case <-all:
			return "passed", nil
		case <-time.After(10 * time.Second):
			return "", errors.New("the other call never arrived: calls are not concurrent")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}})
	bot := engineer
	bot.Tools = []string{"barrier"}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "go")
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[1].Body.Messages
	for _, m := range msgs[len(msgs)-2:] {
		if m.Role != "tool" || !strings.Contains(m.Content, "passed") {
			t.Errorf("tool result = %q, want passed", m.Content)
		}
	}
}

func TestToolResultRendering(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(
		openaitest.Call("empty", `{}`),
		openaitest.Call("fail", `{}`),
		openaitest.Call("big", `{}`),
		openaitest.Call("no_such_tool", `{}`),
		openaitest.Call("empty", `{not json`),
		openaitest.Call("boom", `{}`),
	), openaitest.Text("recovered"))
	reg := NewRegistry()
	_ = reg.Add(&FuncTool{ToolName: "empty", Fn: func(context.Context, ToolCall) (string, error) { return "  \n", nil }})
	_ = reg.Add(&FuncTool{ToolName: "fail", Fn: func(context.Context, ToolCall) (string, error) {
		return "", errors.New("file not found: a.txt")
	}})
	_ = reg.Add(&FuncTool{ToolName: "big", Fn: func(context.Context, ToolCall) (string, error) {
		return strings.Repeat("x", 500), nil
	}})
	_ = reg.Add(&FuncTool{ToolName: "boom", Fn: func(context.Context, ToolCall) (string, error) { panic("kaboom") }})
	bot := engineer
	bot.Tools = []string{"empty", "fail", "big", "boom"}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "go")
	a := newAgent(t, srv, reg, func(o *Options) { o.MaxToolResultChars = 100 })
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "recovered" {
		t.Errorf("reply = %q: the loop should continue after tool errors", res.Reply)
	}
	msgs := srv.Requests()[1].Body.Messages
	results := msgs[len(msgs)-6:]
	checks := []struct {
		name string
		want []string
	}{
		{"empty result", []string{NoOutput}},
		{"tool error", []string{"error: ", "file not found: a.txt"}},
		{"capped", []string{strings.Repeat("x", 100) + "</untrusted>", "output truncated: showing the first 100 of 500"}},
		{"unknown tool", []string{`no tool named "no_such_tool"`, "Available tools: ask_human, big, boom, empty, fail, read_history, recall_messages"}},
		{"invalid JSON", []string{"not valid JSON"}},
		{"panic", []string{"error: the tool boom failed unexpectedly"}},
	}
	for i, c := range checks {
		if results[i].Role != "tool" {
			t.Fatalf("%s: message %d is %q, not a tool result", c.name, i, results[i].Role)
		}
		for _, w := range c.want {
			if !strings.Contains(results[i].Content, w) {
				t.Errorf("%s: result %q lacks %q", c.name, results[i].Content, w)
			}
		}
	}
	if strings.Contains(results[2].Content, strings.Repeat("x", 101)) {
		t.Error("big result not capped")
	}
}

func TestBotWithoutToolNeverSeesIt(t *testing.T) {
	srv := openaitest.New(t)
	reg := NewRegistry()
	_ = reg.Add(stubTool("shell"))
	_ = reg.SetSource("gh", []Tool{stubTool("gh__pr")})
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "hello")
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, reviewer, false, trig)); err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	if got, want := req.ToolNames(), []string{ReadHistoryName, RecallMessagesName, AskHumanName}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want only %v", got, want)
	}
	if strings.Contains(string(req.Raw), "shell") || strings.Contains(string(req.Raw), "gh__pr") {
		t.Error("request mentions a tool the bot does not have")
	}
}

func TestUnavailableToolIsNamed(t *testing.T) {
	srv := openaitest.New(t)
	reg := NewRegistry()
	_ = reg.Add(stubTool("shell"))
	bot := engineer
	bot.Tools = []string{"shell", "github", ReadHistoryName}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "hello")
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	if got, want := req.ToolNames(), []string{"shell", ReadHistoryName, RecallMessagesName, AskHumanName}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if sys := systemText(t, req); !strings.Contains(sys, "unavailable right now: github") {
		t.Errorf("system prompt does not name the unavailable tool:\n%s", sys)
	}
}

func TestTodoListInPrompt(t *testing.T) {
	srv := openaitest.New(t)
	reg := NewRegistry()
	_ = reg.Add(stubTool("todo_write"))
	env := &fakeEnv{agentstest.Env{Todos: []core.TodoItem{{Text: "write tests", Status: "in_progress"}}}}
	trig := env.add(alice, "Alice", "status?")
	for _, hasTool := range []bool{true, false} {
		bot := engineer
		if hasTool {
			bot.Tools = []string{"todo_write"}
		}
		if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		sys := systemText(t, reqs[len(reqs)-1])
		if got := strings.Contains(sys, "- [in_progress] write tests"); got != hasTool {
			t.Errorf("with todo_write=%v: todo list in prompt = %v", hasTool, got)
		}
	}
}

type fakeMemory struct{ query string }

func (m *fakeMemory) Recall(_ context.Context, bot core.BotProfile, query string, limit int) ([]string, error) {
	m.query = query
	return []string{"Always wait for CI before merging."}, nil
}

func TestMemoryHook(t *testing.T) {
	srv := openaitest.New(t)
	mem := &fakeMemory{}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "merge the PR")
	bot := engineer
	bot.Memory = true
	if _, err := execute(t, newAgent(t, srv, nil, func(o *Options) { o.Memory = mem }), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	if mem.query != "merge the PR" {
		t.Errorf("memory query = %q, want the trigger text", mem.query)
	}
	if sys := systemText(t, srv.Requests()[0]); !strings.Contains(sys, "Always wait for CI") {
		t.Errorf("memories missing from prompt:\n%s", sys)
	}
}

func TestModelCallLimit(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Calls(openaitest.Call(ReadHistoryName, `{"limit":1}`))
	})
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "loop forever")
	bot := engineer
	bot.MaxModelCalls = 3
	res, err := execute(t, newAgent(t, srv, nil, nil), newJob(env, bot, false, trig))
	if !errors.Is(err, ErrModelCallLimit) || !strings.Contains(err.Error(), "3 model calls") {
		t.Fatalf("err = %v, want the model call limit", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	if res.Usage.ModelCalls != 3 {
		t.Errorf("usage = %+v", res.Usage)
	}

	// Without a bot override the global limit applies.
	a := newAgent(t, srv, nil, func(o *Options) { o.Limits.MaxModelCallsPerRun = 2 })
	if _, err := execute(t, a, newJob(env, engineer, false, trig)); !errors.Is(err, ErrModelCallLimit) {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 5 {
		t.Errorf("requests = %d, want 3+2", n)
	}
}

func TestModelErrorNamesStatus(t *testing.T) {
	srv := openaitest.New(t)
	// The first try and DefaultModelRetries retries all fail.
	for range 1 + DefaultModelRetries {
		srv.Enqueue(openaitest.Error(http.StatusInternalServerError, "upstream overloaded for key "+testKey))
	}
	env, _, err := hiFromAlice(t, newAgent(t, srv, nil, fastRetry))
	var me *ModelError
	if !errors.As(err, &me) || me.Status != 500 {
		t.Fatalf("err = %v, want a ModelError with status 500", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "status 500") || !strings.Contains(msg, "upstream overloaded") {
		t.Errorf("error %q should name the status and the server's message", msg)
	}
	if strings.Contains(msg, testKey) {
		t.Errorf("error %q leaks the API key", msg)
	}
	if types := env.eventTypes(); !slices.Equal(types, []string{"model_call"}) {
		t.Errorf("events = %v", types)
	}
}

// TestContextLengthShrinksUntilItFits: each context-length error makes the
// next request shorter (older history goes first, the trigger stays) and the
// run goes on; the prompt then says older messages are not shown.
func TestContextLengthShrinksUntilItFits(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.ContextLengthError(), openaitest.ContextLengthError(), openaitest.Text("short answer"))
	env := &fakeEnv{}
	for i := range 10 {
		env.add(alice, "Alice", fmt.Sprintf("old message %d", i))
		env.add(chief.ID(), "Chief", fmt.Sprintf("old reply %d", i))
	}
	trig := env.add(alice, "Alice", "final question")
	res, err := execute(t, newAgent(t, srv, nil, nil), newJob(env, chief, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "short answer" || res.Usage.ModelCalls != 3 {
		t.Errorf("result = %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	for i := 1; i < 3; i++ {
		if len(reqs[i].Raw) >= len(reqs[i-1].Raw) {
			t.Errorf("request %d has %d bytes after one of %d: not shortened", i, len(reqs[i].Raw), len(reqs[i-1].Raw))
		}
	}
	raw := string(reqs[2].Raw)
	if !strings.Contains(raw, "final question") || strings.Contains(raw, "old message 0") {
		t.Errorf("retry should keep the trigger and drop the oldest messages")
	}
	if !strings.Contains(systemText(t, reqs[2]), "older messages of this thread are not shown") {
		t.Error("retry prompt does not mention the cut messages")
	}

	// A server that keeps refusing gets shorter requests until nothing more
	// can go, then the run ends with an error that says so.
	srv.Forget()
	srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.ContextLengthError() })
	_, err = execute(t, newAgent(t, srv, nil, nil), newJob(env, chief, false, trig))
	var me *ModelError
	if !errors.As(err, &me) || !me.ContextLength() || !strings.Contains(me.Notice(), "too long for the model's context window") {
		t.Fatalf("err = %v, want the request-too-long error", err)
	}
	reqs = srv.Requests()
	if len(reqs) < 3 || len(reqs) > 12 {
		t.Errorf("requests = %d, want a few, each shorter", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if len(reqs[i].Raw) >= len(reqs[i-1].Raw) {
			t.Errorf("request %d is not shorter than the one before", i)
		}
	}
}

// TestContextWindowFitsBeforeSending: with the profile's context window set,
// an oversize request is never sent: the history is cut to fit first.
func TestContextWindowFitsBeforeSending(t *testing.T) {
	srv := openaitest.New(t)
	env := &fakeEnv{}
	for i := range 40 {
		env.add(alice, "Alice", fmt.Sprintf("old message %d %s", i, strings.Repeat("x", 2000)))
	}
	trig := env.add(alice, "Alice", "final question")
	a := newAgent(t, srv, nil, func(o *Options) {
		p := o.Providers["default"]
		p.ContextWindow = 8000
		o.Providers["default"] = p
	})
	if _, err := execute(t, a, newJob(env, chief, false, trig)); err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	if n := len(req.Raw) / 4; n > 8000-1000 {
		t.Errorf("request of %d tokens for a window of 8000", n)
	}
	if !strings.Contains(string(req.Raw), "final question") {
		t.Error("the trigger was cut")
	}
}

func TestRunTimeout(t *testing.T) {
	srv := openaitest.New(t)
	block := make(chan struct{})
	defer close(block)
	arrived := make(chan struct{}, 1)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		select {
		case arrived <- struct{}{}:
		default:
		}
		return openaitest.Reply{Text: "late", Wait: block}
	})
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "hi")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	a := newAgent(t, srv, nil, nil)
	go func() {
		_, err := a.Execute(ctx, newJob(env, chief, false, trig))
		done <- err
	}()
	// Cancel once the request has reached the server.
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the model")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Execute did not return after cancellation")
	}
}

func TestProviderSelection(t *testing.T) {
	srv := openaitest.New(t)
	a := newAgent(t, srv, nil, func(o *Options) {
		o.Providers["local"] = Provider{BaseURL: srv.URL(), Model: "local-model"}
	})
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "hi")
	bot := engineer
	bot.LLM = "local"
	if _, err := execute(t, a, newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	bot.Model = "override"
	if _, err := execute(t, a, newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if reqs[0].Body.Model != "local-model" || reqs[1].Body.Model != "override" {
		t.Errorf("models = %q, %q", reqs[0].Body.Model, reqs[1].Body.Model)
	}
	if reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("provider without key sent Authorization %q", reqs[0].Header.Get("Authorization"))
	}
	bot.LLM = "missing"
	if _, err := execute(t, a, newJob(env, bot, false, trig)); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("err = %v, want ErrUnknownProvider", err)
	}
	if _, err := New(Options{}); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("New without providers = %v", err)
	}
}

func TestRequestTimeoutIsAModelError(t *testing.T) {
	srv := openaitest.New(t)
	block := make(chan struct{})
	defer close(block)
	srv.Enqueue(openaitest.Reply{Text: "late", Wait: block})
	a := newAgent(t, srv, nil, func(o *Options) { o.RequestTimeout = 100 * time.Millisecond })
	_, _, err := hiFromAlice(t, a)
	var me *ModelError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "no complete answer within 100ms") {
		t.Fatalf("err = %v, want a model error naming the request timeout", err)
	}
}
