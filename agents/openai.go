package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// openaiModelPath ends the path of a chat completion request (transport).
const openaiModelPath = "/chat/completions"

// openaiAPI is the ModelAPI of the OpenAI chat completions protocol, on
// go-openai: every OpenAI-compatible server (DESIGN.md §6).
type openaiAPI struct {
	name   string // the profile's name, for hints
	client *openai.Client
}

var _ ModelAPI = (*openaiAPI)(nil)

// newOpenAIClient is the go-openai client of profile p: base (nil: OpenAI's)
// without its query, which the transport adds.
func newOpenAIClient(p Provider, base *url.URL, hc *http.Client) *openai.Client {
	cfg := openai.DefaultConfig(p.APIKey)
	if base != nil {
		cfg.BaseURL = base.String()
	}
	cfg.HTTPClient = hc
	return openai.NewClientWithConfig(cfg)
}

// Chat implements ModelAPI. A streamed call asks for the usage in the stream
// (stream_options.include_usage); the transport turns a plain JSON body into
// events and notes whether "data: [DONE]" arrived (streamInfo).
func (o *openaiAPI) Chat(ctx context.Context, req ChatRequest) (ChatAnswer, error) {
	creq := openai.ChatCompletionRequest{Model: req.Model, Messages: req.Messages, Tools: req.Tools}
	if req.MaxTokens > 0 {
		creq.MaxTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		creq.Temperature = float32(*req.Temperature)
	}
	if req.ReasoningEffort != "" {
		creq.ReasoningEffort = req.ReasoningEffort
	}
	if !req.Stream {
		resp, err := o.client.CreateChatCompletion(ctx, creq)
		if err != nil {
			return ChatAnswer{}, o.mapErr(err)
		}
		a := ChatAnswer{Usage: openaiUsage(resp.Usage), Model: resp.Model}
		if len(resp.Choices) > 0 {
			ch := resp.Choices[0]
			a.Text, a.Calls = ch.Message.Content, ch.Message.ToolCalls
			a.Finish, a.Reason = string(ch.FinishReason), "finish_reason="+string(ch.FinishReason)
		}
		return a, nil
	}
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	si, _ := ctx.Value(streamInfoKey{}).(*streamInfo)
	if si == nil {
		si = &streamInfo{}
		ctx = withStreamInfo(ctx, si)
	}
	si.done.Store(false)
	a, err := o.stream(ctx, creq, req.OnText)
	if err != nil {
		return a, o.mapErr(err)
	}
	switch {
	case a.Finish == "":
		a.Incomplete = "no finish_reason arrived"
	case !si.done.Load():
		a.Incomplete = "the server did not send [DONE]"
	}
	return a, nil
}

// stream makes one streaming request and reads it to its end.
func (o *openaiAPI) stream(ctx context.Context, req openai.ChatCompletionRequest, onText func(string)) (ChatAnswer, error) {
	stream, err := o.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return ChatAnswer{}, err
	}
	defer stream.Close()
	var (
		a       ChatAnswer
		content strings.Builder
		asm     callAssembler
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.Text = content.String()
			return a, err
		}
		if chunk.Model != "" {
			a.Model = chunk.Model
		}
		if chunk.Usage != nil {
			a.Usage = openaiUsage(*chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				if onText != nil {
					onText(ch.Delta.Content)
				}
			}
			for _, d := range ch.Delta.ToolCalls {
				asm.add(d)
			}
			if ch.FinishReason != "" {
				a.Finish = string(ch.FinishReason)
				a.Reason = "finish_reason=" + a.Finish
			}
		}
	}
	a.Text = content.String()
	a.Calls = asm.calls()
	return a, nil
}

func openaiUsage(u openai.Usage) Usage {
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CacheReadTokens = d.CachedTokens
	}
	return out
}

// mapErr turns go-openai's HTTP errors into an *apiError; other errors (a
// stall, a network error, ctx's) pass unchanged.
func (o *openaiAPI) mapErr(err error) error {
	var (
		stall  *StallError
		reqErr *openai.RequestError
		apiErr *openai.APIError
	)
	switch {
	case errors.As(err, &stall):
		return err
	case errors.As(err, &reqErr):
		// Not an OpenAI-style error (go-openai may wrap an empty APIError in
		// it, so this goes first): a proxy's or web server's page, a path the
		// server does not serve, or JSON of another shape.
		e := &apiError{Status: reqErr.HTTPStatusCode, Message: bodyText(reqErr.Body)}
		if e.Status == http.StatusNotFound && !json.Valid(reqErr.Body) {
			e.Hint = fmt.Sprintf(" (is base_url of llm profile %q right? OpenAI-compatible servers usually answer under /v1)", o.name)
		}
		return e
	case errors.As(err, &apiErr):
		e := &apiError{Status: apiErr.HTTPStatusCode, Message: apiErr.Message}
		if s, ok := apiErr.Code.(string); ok {
			e.Code = s
		} else if apiErr.Code != nil {
			e.Code = fmt.Sprint(apiErr.Code)
		}
		return e
	}
	return err
}
