package anthropictest

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func client(s *Server) anthropic.Client {
	return anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.URL()),
		option.WithHeader("x-api-key", "k"), option.WithMaxRetries(0))
}

// TestSDKReadsTheStream: the official SDK accumulates the fake's events into
// the message the reply scripts: text, a tool_use with its streamed input, the
// stop reason and the usage with cache tokens.
func TestSDKReadsTheStream(t *testing.T) {
	s := New(t)
	s.Enqueue(Reply{Text: "Let me look.", ToolCalls: []ToolCall{{ID: "toolu_x", Name: "lookup", Input: `{"key":"answer"}`}},
		Usage: Usage{InputTokens: 12, OutputTokens: 8, CacheReadTokens: 100, CacheWriteTokens: 20}})
	c := client(s)
	stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "Let me look." || msg.Content[1].Name != "lookup" ||
		string(msg.Content[1].Input) != `{"key":"answer"}` || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("message = %s", msg.RawJSON())
	}
	if u := msg.Usage; u.InputTokens != 12 || u.OutputTokens != 8 || u.CacheReadInputTokens != 100 || u.CacheCreationInputTokens != 20 {
		t.Errorf("usage = %+v", u)
	}
	if r := s.Requests(); len(r) != 1 || !r[0].Body.Stream || r[0].Body.Messages[0].Content[0].Text != "hi" {
		t.Errorf("requests = %+v", r)
	}
}

// TestSDKReadsErrors: an HTTP error and an error event mid-stream are the
// SDK's *anthropic.Error with the type and message.
func TestSDKReadsErrors(t *testing.T) {
	s := New(t)
	s.Enqueue(Error(429, "slow down"), Reply{Text: "half an answer", StreamError: "overloaded_error"})
	c := client(s)
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	for _, want := range []struct {
		status int
		typ    string
		msg    string
	}{{429, "rate_limit_error", "slow down"}, {200, "overloaded_error", "Overloaded"}} {
		stream := c.Messages.NewStreaming(context.Background(), params)
		for stream.Next() {
		}
		var e *anthropic.Error
		if err := stream.Err(); !errors.As(err, &e) || e.StatusCode != want.status || string(e.Type()) != want.typ || e.Message != want.msg {
			t.Errorf("err = %v, want %d %s %q", err, want.status, want.typ, want.msg)
		}
	}
}
