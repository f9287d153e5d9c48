package openaitest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/openaitest"
)

func client(s *openaitest.Server) *openai.Client {
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func request(stream bool) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    "fake-model",
		Stream:   stream,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello there"}},
	}
}

// collect reads a stream into its text, assembled tool calls (by index) and usage.
func collect(t *testing.T, st *openai.ChatCompletionStream) (string, map[int]*openai.ToolCall, *openai.Usage, []int) {
	t.Helper()
	defer st.Close()
	var text strings.Builder
	calls := map[int]*openai.ToolCall{}
	var usage *openai.Usage
	var order []int
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("tool call delta without index")
				}
				order = append(order, *tc.Index)
				acc := calls[*tc.Index]
				if acc == nil {
					acc = &openai.ToolCall{}
					calls[*tc.Index] = acc
				}
				if tc.ID != "" {
					acc.ID = tc.ID
				}
				acc.Function.Name += tc.Function.Name
				acc.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	return text.String(), calls, usage, order
}

func TestEchoNonStreaming(t *testing.T) {
	s := openaitest.New(t)
	resp, err := client(s).CreateChatCompletion(context.Background(), request(false))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Choices[0].Message.Content, "echo: hello there"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Errorf("usage not reported: %+v", resp.Usage)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" {
		t.Fatalf("requests = %+v", reqs)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	if !strings.Contains(string(reqs[0].Raw), `"hello there"`) {
		t.Errorf("raw body missing content: %s", reqs[0].Raw)
	}
}

func TestStreamingText(t *testing.T) {
	s := openaitest.New(t)
	s.Enqueue(openaitest.Reply{Text: "streamed reply text", Usage: openaitest.Usage{PromptTokens: 7, CompletionTokens: 3}})
	req := request(true)
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := client(s).CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	text, calls, usage, _ := collect(t, st)
	if text != "streamed reply text" || len(calls) != 0 {
		t.Errorf("text = %q calls = %v", text, calls)
	}
	if usage == nil || usage.PromptTokens != 7 || usage.CompletionTokens != 3 {
		t.Errorf("usage = %+v", usage)
	}
}

func TestStreamingToolCalls(t *testing.T) {
	for _, interleave := range []bool{false, true} {
		t.Run(map[bool]string{false: "sequential", true: "interleaved"}[interleave], func(t *testing.T) {
			s := openaitest.New(t)
			s.Enqueue(openaitest.Reply{Interleave: interleave, ToolCalls: []openaitest.ToolCall{
				{ID: "a", Name: "first", Arguments: `{"x":"one two three"}`},
				{ID: "b", Name: "second", Arguments: `{"y":42}`},
			}})
			st, err := client(s).CreateChatCompletionStream(context.Background(), request(true))
			if err != nil {
				t.Fatal(err)
			}
			_, calls, _, order := collect(t, st)
			if len(calls) != 2 {
				t.Fatalf("calls = %d, want 2", len(calls))
			}
			if c := calls[0]; c.ID != "a" || c.Function.Name != "first" || c.Function.Arguments != `{"x":"one two three"}` {
				t.Errorf("call 0 = %+v", c)
			}
			if c := calls[1]; c.ID != "b" || c.Function.Name != "second" || c.Function.Arguments != `{"y":42}` {
				t.Errorf("call 1 = %+v", c)
			}
			switched := false
			for i := 1; i < len(order); i++ {
				if order[i] < order[i-1] {
					switched = true
				}
			}
			if switched != interleave {
				t.Errorf("delta order %v: interleaved = %v, want %v", order, switched, interleave)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	s := openaitest.New(t)
	s.Enqueue(openaitest.Error(http.StatusInternalServerError, "boom"), openaitest.ContextLengthError())
	_, err := client(s).CreateChatCompletionStream(context.Background(), request(true))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "boom" {
		t.Fatalf("err = %v", err)
	}
	_, err = client(s).CreateChatCompletion(context.Background(), request(false))
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Fatalf("err = %#v", err)
	}
}

func TestHandlerAndWait(t *testing.T) {
	s := openaitest.New(t)
	s.Handle(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Text("handled " + openaitest.LastUserText(r))
	})
	resp, err := client(s).CreateChatCompletion(context.Background(), request(false))
	if err != nil || resp.Choices[0].Message.Content != "handled hello there" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}

	block := make(chan struct{})
	s.Enqueue(openaitest.Reply{Text: "late", Wait: block})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client(s).CreateChatCompletion(ctx, request(false))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	close(block)
}

// TestMisbehaviours checks the wire form of the broken replies, over raw HTTP.
func TestMisbehaviours(t *testing.T) {
	s := openaitest.New(t)
	post := func(stream bool) (*http.Response, string) {
		t.Helper()
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(raw)
	}
	s.Enqueue(openaitest.Reply{Status: 429, ErrMessage: "slow", Header: map[string]string{"Retry-After": "3"}})
	if resp, _ := post(true); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	s.Enqueue(openaitest.Reply{Text: "cut", NoDone: true, NoFinish: true})
	if _, body := post(true); strings.Contains(body, "[DONE]") || strings.Contains(body, `"finish_reason":"stop"`) || !strings.Contains(body, `"content":"c"`) {
		t.Errorf("stream = %s", body)
	}
	s.Enqueue(openaitest.Reply{Text: "long", Finish: "length"})
	if _, body := post(true); !strings.Contains(body, `"finish_reason":"length"`) || !strings.Contains(body, "[DONE]") {
		t.Errorf("stream = %s", body)
	}
	s.Enqueue(openaitest.Reply{Text: "plain", JSON: true})
	if resp, body := post(true); !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(body, `"chat.completion"`) {
		t.Errorf("content type %q, body %s", resp.Header.Get("Content-Type"), body)
	}
}
