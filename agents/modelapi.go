package agents

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// The wire protocols a provider profile may speak (Provider.API, the config's
// llm.<name>.provider).
const (
	// APIOpenAI is the OpenAI chat completions API (go-openai): OpenAI, Azure,
	// OpenRouter, vLLM, llama.cpp, LM Studio, Ollama, Gemini's OpenAI endpoint.
	// The default.
	APIOpenAI = "openai"
	// APIAnthropic is Anthropic's Messages API (the official Go SDK), with
	// prompt-cache breakpoints (anthropic.go).
	APIAnthropic = "anthropic"
)

// ModelAPI is how a provider profile's model is called: one implementation per
// wire protocol (openaiAPI in openai.go, anthropicAPI in anthropic.go), chosen
// by Provider.API in newModelAPI. A third protocol is one file and one case
// there.
//
// Chat sends one request and blocks until the answer is complete or the call
// failed; it is safe for concurrent use. Every request goes through the
// profile's transport (transport.go), which adds headers and keys, watches for
// stalls and retries 429, 408, 5xx and network errors as the fallback chain
// allows (chain.go), so Chat itself never retries.
//
// Errors: an HTTP error answer is an *apiError (status, the server's code and
// message); a stalled stream a *StallError; a connection failure a *url.Error;
// ctx's error when it ends. The run turns them into a *ModelError (modelErr).
type ModelAPI interface {
	Chat(ctx context.Context, req ChatRequest) (ChatAnswer, error)
}

// ChatRequest is one model call. Messages and Tools are in the form agents
// keeps its conversations in (the OpenAI chat format, which checkpoints store);
// a ModelAPI translates them into its protocol.
type ChatRequest struct {
	Model string
	// Messages: the system prompt first, then the conversation in order
	// (user, assistant with tool calls, tool results). The stable part comes
	// first (DESIGN.md §6), so a protocol with explicit prompt caching marks
	// its end (anthropic.go).
	Messages []openai.ChatCompletionMessage
	// StableEnd is how many leading Messages (the system prompt and the
	// thread's stable history) stay byte-identical from run to run of the
	// thread, until the history next advances by a block or a summary; 0 says
	// nothing is known. A protocol with explicit prompt caching marks it.
	StableEnd int
	Tools     []openai.Tool
	// MaxTokens, Temperature and ReasoningEffort are the bot's parameters;
	// zero values send nothing (a protocol that requires max_tokens sends its
	// default). A protocol without an equivalent ignores them.
	MaxTokens       int
	Temperature     *float64
	ReasoningEffort string
	// Stream asks for a streamed answer; OnText, when set, receives each text
	// delta as it arrives. The run streams; reflection does not.
	Stream bool
	OnText func(delta string)
}

// Finish reasons of a ChatAnswer, in the OpenAI API's words; other protocols
// map theirs onto them.
const (
	FinishStop          = "stop"
	FinishToolCalls     = "tool_calls"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// ChatAnswer is a model's answer.
type ChatAnswer struct {
	Text  string
	Calls []openai.ToolCall // assembled from the streamed deltas, ids and arguments filled
	// Finish is why the answer ended (FinishStop...); "" when no reason arrived.
	// Reason is the same in the protocol's words for people ("finish_reason=length").
	Finish, Reason string
	// Incomplete says what was missing when a stream ended before its end
	// marker ("the server did not send [DONE]"); "" for a whole answer.
	Incomplete string
	Usage      Usage
	// Model is the model that served the call as the server named it ("" when
	// it did not say).
	Model string
}

// Usage is the token usage of one model call. InputTokens counts every prompt
// token, those read from and written to a prompt cache included (as the OpenAI
// API counts them and the ledger stores them, core.UsageEntry).
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
}

// apiError is an HTTP error answer of a model API.
type apiError struct {
	Status  int
	Code    string // the server's error code or type: "context_length_exceeded", "rate_limit_error"
	Message string // the server's message, else the body's text (bodyText); not yet redacted
	// Hint is added to the notice after the server's message, e.g. a hint that
	// the base URL looks wrong.
	Hint string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("status %d: %s", e.Status, e.Message)
}

// newModelAPI builds the ModelAPI of profile name p on the HTTP client hc
// (whose Transport is the profile's transport). It does no I/O. Errors:
// ErrUnknownProvider for an unknown protocol or base URL.
func newModelAPI(name string, p Provider, hc *http.Client, tr *transport) (ModelAPI, *openai.Client, error) {
	var base *url.URL
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: provider %q: base URL %q: %v", ErrUnknownProvider, name, core.Redact(p.BaseURL), core.Redact(err.Error()))
		}
		// Both SDKs append the endpoint path to the base URL as text, so a
		// query (a gateway's api-key) must travel separately.
		if u.RawQuery != "" {
			tr.query = u.Query()
			u.RawQuery, u.ForceQuery = "", false
		}
		base = u
	}
	switch strings.ToLower(p.API) {
	case "", APIOpenAI:
		tr.modelPath = openaiModelPath
		c := newOpenAIClient(p, base, hc)
		return &openaiAPI{name: name, client: c}, c, nil
	case APIAnthropic:
		tr.modelPath = anthropicModelPath
		return newAnthropicAPI(name, p, base, hc), nil, nil
	}
	return nil, nil, fmt.Errorf("%w: provider %q: unknown api %q (want %q or %q)", ErrUnknownProvider, name, p.API, APIOpenAI, APIAnthropic)
}
