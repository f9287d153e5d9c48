package agents

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/anthropictest"
)

const anthropicKey = "sk-ant-test-key-123"

// newAnthropicAgent is newAgent on an Anthropic profile served by srv.
func newAnthropicAgent(t *testing.T, srv *anthropictest.Server, reg *Registry, mutate func(*Options)) *Agent {
	t.Helper()
	return newAgentOn(t, Provider{API: APIAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey, Model: "claude-test"}, reg, mutate)
}

// chat makes one call through the profile's ModelAPI.
func chat(t *testing.T, a *Agent, req ChatRequest) (ChatAnswer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.clients["default"].api.Chat(ctx, req)
}

// TestAnthropicRequestTranslation: the conversation in agents' form becomes
// Messages API blocks: the system prompt, user text, an image as base64, the
// model's text and tool calls as tool_use, tool results joined into one user
// turn after them; tools with their schema; max_tokens defaulted; temperature
// and effort passed; four cache breakpoints: the system prompt, the end of the
// thread's stable history, and the last two turns.
func TestAnthropicRequestTranslation(t *testing.T) {
	srv := anthropictest.New(t)
	srv.RequireKey(anthropicKey)
	a := newAnthropicAgent(t, srv, nil, nil)
	temp := 0.25
	req := ChatRequest{
		Model: "claude-test",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "You are a bot."},
			{Role: openai.ChatMessageRoleUser, Content: "earlier question"},
			{Role: openai.ChatMessageRoleAssistant, Content: "earlier answer"},
			{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
				{Type: openai.ChatMessagePartTypeText, Text: "what is in this picture?"},
				{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,iVBORw0KGgo="}},
			}},
			{Role: openai.ChatMessageRoleAssistant, Content: "Let me look.", ToolCalls: []openai.ToolCall{
				{ID: "toolu_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "lookup", Arguments: `{"key":"a"}`}},
				{ID: "call.2", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "lookup", Arguments: `not json`}},
			}},
			{Role: openai.ChatMessageRoleTool, ToolCallID: "toolu_1", Content: "42"},
			{Role: openai.ChatMessageRoleTool, ToolCallID: "call.2", Content: ""},
		},
		Tools: []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "lookup", Description: "look a key up",
			Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"],"additionalProperties":false}`)}}},
		Temperature:     &temp,
		ReasoningEffort: "minimal",
		StableEnd:       3, // the system prompt and the earlier exchange
	}
	if _, err := chat(t, a, req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if h := got.Header; h.Get("X-Api-Key") != anthropicKey || h.Get("Authorization") != "" || h.Get("Anthropic-Version") == "" || h.Get("X-Team") != "openbot" {
		t.Errorf("headers = %v", h)
	}
	b := got.Body
	if b.Model != "claude-test" || b.MaxTokens != DefaultAnthropicMaxTokens || !b.Stream || b.Temperature == nil || *b.Temperature != 0.25 {
		t.Errorf("model %q, max_tokens %d, stream %v, temperature %v", b.Model, b.MaxTokens, b.Stream, b.Temperature)
	}
	if eff := got.JSON["output_config"]; eff == nil || eff.(map[string]any)["effort"] != "low" {
		t.Errorf("output_config = %v, want effort low", eff)
	}
	if got.SystemText() != "You are a bot." {
		t.Errorf("system = %q", got.SystemText())
	}
	var roles []string
	for _, m := range b.Messages {
		var types []string
		for _, c := range m.Content {
			types = append(types, c.Type)
		}
		roles = append(roles, m.Role+":"+strings.Join(types, ","))
	}
	want := []string{"user:text", "assistant:text", "user:text,image", "assistant:text,tool_use,tool_use", "user:tool_result,tool_result"}
	if !slices.Equal(roles, want) {
		t.Fatalf("messages = %v, want %v", roles, want)
	}
	img := b.Messages[2].Content[1].Source
	if img == nil || img.Type != "base64" || img.MediaType != "image/png" || img.Data != "iVBORw0KGgo=" {
		t.Errorf("image source = %+v", img)
	}
	uses, results := b.Messages[3].Content[1:], b.Messages[4].Content
	if uses[0].ID != "toolu_1" || string(uses[0].Input) != `{"key":"a"}` || uses[1].ID != "call_2" || string(uses[1].Input) != `{}` {
		t.Errorf("tool_use blocks = %+v", uses)
	}
	if results[0].ToolUseID != "toolu_1" || results[0].ResultText() != "42" || results[1].ToolUseID != "call_2" || results[1].ResultText() != "(no output)" {
		t.Errorf("tool_result blocks = %+v", results)
	}
	if len(b.Tools) != 1 || b.Tools[0].Name != "lookup" || b.Tools[0].Description != "look a key up" {
		t.Fatalf("tools = %+v", b.Tools)
	}
	var schema map[string]any
	_ = json.Unmarshal(b.Tools[0].InputSchema, &schema)
	if schema["type"] != "object" || schema["additionalProperties"] != false || schema["required"].([]any)[0] != "key" ||
		schema["properties"].(map[string]any)["key"] == nil {
		t.Errorf("input_schema = %s", b.Tools[0].InputSchema)
	}
	wantBP := []string{"system[0]", "messages[1].content[0]", "messages[3].content[2]", "messages[4].content[1]"}
	if bp := got.Breakpoints(); !slices.Equal(bp, wantBP) {
		t.Errorf("cache breakpoints = %v, want %v", bp, wantBP)
	}
}

// TestAnthropicConversationEdges: a conversation that starts with the model's
// turn gets a user turn first; empty texts are never sent as empty blocks; no
// system prompt puts the first breakpoint on the last tool.
func TestAnthropicConversationEdges(t *testing.T) {
	srv := anthropictest.New(t)
	a := newAnthropicAgent(t, srv, nil, nil)
	_, err := chat(t, a, ChatRequest{Model: "m", Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleAssistant, Content: "I posted first."},
		{Role: openai.ChatMessageRoleUser, Content: " "},
	}, Tools: toolDefs([]Tool{&FuncTool{ToolName: "a"}, &FuncTool{ToolName: "b"}})})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	ms := got.Body.Messages
	if len(ms) != 3 || ms[0].Role != "user" || ms[1].Content[0].Text != "I posted first." || ms[2].Content[0].Text == "" {
		t.Errorf("messages = %+v", ms)
	}
	if bp := got.Breakpoints(); !slices.Equal(bp, []string{"tools[1]", "messages[1].content[0]", "messages[2].content[0]"}) {
		t.Errorf("breakpoints = %v", bp)
	}
}

// TestAnthropicStreamedAnswer: text deltas reach OnText as they come, tool
// input arrives in input_json_delta pieces and is assembled per block, and the
// usage sums the cache's input tokens into InputTokens.
func TestAnthropicStreamedAnswer(t *testing.T) {
	srv := anthropictest.New(t)
	srv.Enqueue(anthropictest.Reply{Text: "Looking both up.", Model: "claude-test-20990101",
		ToolCalls: []anthropictest.ToolCall{{ID: "toolu_a", Name: "lookup", Input: `{"key":"alpha"}`}, {ID: "toolu_b", Name: "lookup"}},
		Usage:     anthropictest.Usage{InputTokens: 10, OutputTokens: 7, CacheReadTokens: 1000, CacheWriteTokens: 200}})
	a := newAnthropicAgent(t, srv, nil, nil)
	var deltas []string
	ans, err := chat(t, a, ChatRequest{Model: "claude-test", Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		OnText:   func(d string) { deltas = append(deltas, d) }})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Looking both up." || strings.Join(deltas, "") != ans.Text || len(deltas) < 2 {
		t.Errorf("text %q from deltas %q", ans.Text, deltas)
	}
	if len(ans.Calls) != 2 || ans.Calls[0].ID != "toolu_a" || ans.Calls[0].Function.Arguments != `{"key":"alpha"}` ||
		ans.Calls[1].ID != "toolu_b" || ans.Calls[1].Function.Arguments != "{}" {
		t.Errorf("calls = %+v", ans.Calls)
	}
	if ans.Finish != FinishToolCalls || ans.Incomplete != "" || ans.Model != "claude-test-20990101" {
		t.Errorf("finish %q, incomplete %q, model %q", ans.Finish, ans.Incomplete, ans.Model)
	}
	if want := (Usage{InputTokens: 1210, OutputTokens: 7, CacheReadTokens: 1000, CacheWriteTokens: 200}); ans.Usage != want {
		t.Errorf("usage = %+v, want %+v", ans.Usage, want)
	}
}

// TestAnthropicBrokenAnswers: the same ModelErrors as the OpenAI path for a
// stream cut short, an answer cut off or refused, and an empty answer; an
// error event mid-stream is a ModelError with the type's status.
func TestAnthropicBrokenAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  anthropictest.Reply
		want   string
		status int
	}{
		{"empty answer", anthropictest.Reply{}, "the model returned an empty answer", 0},
		{"no message_stop", anthropictest.Reply{Text: "half an ans", NoStop: true}, "the stream ended early: the server did not send message_stop", 0},
		{"no message_delta", anthropictest.Reply{Text: "half an ans", NoDelta: true}, "the stream ended early: no stop_reason arrived", 0},
		{"max_tokens", anthropictest.Reply{Text: "a long answer that st", StopReason: "max_tokens"}, "the model's answer was cut off (stop_reason=max_tokens)", 0},
		{"refusal", anthropictest.Reply{Text: "x", StopReason: "refusal"}, "content filter (stop_reason=refusal)", 0},
		{"overloaded mid-stream", anthropictest.Reply{Text: "half an answer", StreamError: "overloaded_error"}, "Overloaded", 529},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := anthropictest.New(t)
			srv.Enqueue(tc.reply)
			_, res, err := hiFromAlice(t, newAnthropicAgent(t, srv, nil, fastRetry))
			var me *ModelError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) || me.Status != tc.status {
				t.Fatalf("err = %v (status %d), want a ModelError saying %q with status %d", err, me.Status, tc.want, tc.status)
			}
			if res.Reply != "" || res.Usage.ModelCalls != 1 || len(srv.Requests()) != 1 {
				t.Errorf("res = %+v, requests = %d", res, len(srv.Requests()))
			}
		})
	}
}

// TestAnthropicRetries: 429 with retry-after and 5xx (529 overloaded
// included) are retried by the transport exactly as on the OpenAI path; 400,
// 401 and 403 are not, and a 429 asking for more than a minute is passed on.
func TestAnthropicRetries(t *testing.T) {
	t.Run("429 honours retry-after", func(t *testing.T) {
		srv := anthropictest.New(t)
		limited := anthropictest.Error(http.StatusTooManyRequests, "Number of request tokens has exceeded your per-minute rate limit")
		limited.Header = map[string]string{"retry-after": "2"}
		srv.Enqueue(limited, anthropictest.Text("after the wait"))
		w := &waits{}
		env, res, err := hiFromAlice(t, newAnthropicAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
		if err != nil {
			t.Fatal(err)
		}
		if res.Reply != "after the wait" || res.Usage.ModelCalls != 1 {
			t.Errorf("res = %+v", res)
		}
		if got := w.got(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
			t.Errorf("waits = %v, want the server's 2s", got)
		}
		if ev := env.Events[0].Payload; ev["retries"] != float64(1) {
			t.Errorf("model_call event = %v, want retries 1", ev)
		}
	})
	t.Run("5xx backs off then fails", func(t *testing.T) {
		srv := anthropictest.New(t)
		srv.Enqueue(anthropictest.Error(500, "Internal server error"), anthropictest.Error(529, "Overloaded"))
		for range DefaultModelRetries - 1 {
			srv.Enqueue(anthropictest.Error(500, "Internal server error"))
		}
		srv.Enqueue(anthropictest.Text("too late"))
		w := &waits{}
		_, _, err := hiFromAlice(t, newAnthropicAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
		var me *ModelError
		if !errors.As(err, &me) || me.Status != 500 || me.Code != "api_error" || !strings.Contains(me.Notice(), "HTTP 500: Internal server error") {
			t.Fatalf("err = %v, want the 500", err)
		}
		if n := len(srv.Requests()); n != 1+DefaultModelRetries || len(w.got()) != DefaultModelRetries {
			t.Errorf("requests = %d, waits = %v", n, w.got())
		}
	})
	for _, tc := range []struct {
		reply anthropictest.Reply
		want  int
	}{
		{anthropictest.Error(http.StatusBadRequest, "messages: text content blocks must be non-empty"), 400},
		{anthropictest.Error(http.StatusUnauthorized, "invalid x-api-key"), 401},
		{anthropictest.Error(http.StatusForbidden, "Your API key does not have permission to use the specified resource."), 403},
		{anthropictest.Reply{Status: 429, ErrMessage: "come back tomorrow", Header: map[string]string{"retry-after": "86400"}}, 429},
	} {
		srv := anthropictest.New(t)
		srv.Enqueue(tc.reply, anthropictest.Text("should not be asked"))
		w := &waits{}
		_, _, err := hiFromAlice(t, newAnthropicAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
		var me *ModelError
		if !errors.As(err, &me) || me.Status != tc.want || !strings.Contains(me.Notice(), tc.reply.ErrMessage) {
			t.Errorf("%d: err = %v", tc.want, err)
		}
		if n := len(srv.Requests()); n != 1 || len(w.got()) != 0 {
			t.Errorf("%d: requests = %d, waits = %v; want no retry", tc.want, n, w.got())
		}
	}
}

// TestAnthropicContextLength: Anthropic's "prompt is too long" is a context
// length error, so the run retries once with its history trimmed.
func TestAnthropicContextLength(t *testing.T) {
	srv := anthropictest.New(t)
	srv.Enqueue(anthropictest.Error(400, "prompt is too long: 208310 tokens > 200000 maximum"), anthropictest.Text("fits now"))
	env := &fakeEnv{}
	for i := range 6 {
		env.add(alice, "Alice", strings.Repeat("old message ", 10+i))
	}
	trig := env.add(alice, "Alice", "hi")
	res, err := execute(t, newAnthropicAgent(t, srv, nil, fastRetry), newJob(env, chief, false, trig))
	if err != nil || res.Reply != "fits now" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || len(reqs[1].Raw) >= len(reqs[0].Raw) {
		t.Errorf("requests = %d; the second should be shorter", len(reqs))
	}
}

// TestAnthropicBaseURLAndEnvironment: the profile's key and base URL are the
// only ones used (no ANTHROPIC_* variable), a trailing /v1 is dropped and a
// base URL query reaches the server; a wrong path's HTML page gets a hint.
func TestAnthropicBaseURLAndEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	srv := anthropictest.New(t)
	srv.RequireKey(anthropicKey)
	a, err := New(Options{Providers: map[string]Provider{"default": {API: "anthropic", BaseURL: srv.URL() + "/v1/?api-key=GATEWAY", APIKey: anthropicKey, Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat(t, a, ChatRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Path != "/v1/messages" || got.Header.Get("Authorization") != "" {
		t.Errorf("path %q, authorization %q", got.Path, got.Header.Get("Authorization"))
	}

	proxy := anthropictest.New(t)
	proxy.Enqueue(anthropictest.Reply{Status: 404, ErrBody: "<html><title>404 Not Found</title></html>"})
	_, _, err = hiFromAlice(t, newAnthropicAgent(t, proxy, nil, nil))
	var me *ModelError
	if !errors.As(err, &me) || me.Status != 404 || !strings.Contains(me.Notice(), "404 Not Found (is base_url of llm profile \"default\" right?") {
		t.Errorf("err = %v, notice %q", err, me.Notice())
	}
}

// TestProviderAPIs: an unknown API is refused by New; an Anthropic profile
// offers no embeddings.
func TestProviderAPIs(t *testing.T) {
	_, err := New(Options{Providers: map[string]Provider{"x": {API: "gemini", Model: "m"}}})
	if !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), `"gemini"`) {
		t.Errorf("unknown api: %v", err)
	}
	srv := anthropictest.New(t)
	a := newAnthropicAgent(t, srv, nil, nil)
	if _, err := a.Embedder("default", "voyage-3"); !errors.Is(err, ErrNoEmbeddings) {
		t.Errorf("embedder on anthropic: %v", err)
	}
}
