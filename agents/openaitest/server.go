// Package openaitest is a fake OpenAI-compatible chat completions server for tests.
//
// It speaks the real wire protocol of POST /v1/chat/completions (and
// /chat/completions), and of POST /v1/embeddings with deterministic vectors (Embed): non-streaming JSON responses and streaming server-sent events
// ("data: {...}\n\n" chunks ended by "data: [DONE]"), with tool calls split across
// chunks the way OpenAI sends them (id and name in the first delta of a call, the
// arguments in pieces after it, every delta carrying the call's index). It listens on
// 127.0.0.1 only, so the real go-openai client code paths run without the internet.
//
// Replies are scripted: a FIFO queue of Reply values (Enqueue), else a handler
// (Handle), else the default echo behaviour, which answers "echo: <last user
// message>". Every request is recorded, raw and decoded, for assertions. Replies can
// also misbehave the ways real servers do: extra headers (Retry-After), a chosen
// finish_reason, a stream without its finish chunk or without [DONE], a plain
// JSON body for a streaming request, and stalls before the headers (Wait) or in
// the middle of the stream (StallMidStream).
package openaitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/internal/fakemodel"
	"openbot/internal/waitctx"
)

// ToolCall is one tool call the fake model makes.
type ToolCall struct {
	ID        string // defaults to "call_<n>"
	Name      string
	Arguments string // JSON text, sent in several pieces when streaming
}

// Usage is the token usage a reply reports; zero values are replaced by a rough
// estimate (prompt: request bytes/4, completion: reply bytes/4, at least 1 each).
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens, when set, is reported as prompt_tokens_details.cached_tokens.
	CachedTokens int
}

// Reply is one scripted response. Exactly one of these forms applies, checked in
// this order: Status != 0 is an HTTP error with an OpenAI error JSON body; otherwise
// Text and/or ToolCalls make a normal assistant message.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// Interleave, in streaming mode, sends the deltas of the tool calls round-robin
	// (call 0 header, call 1 header, call 0 piece, call 1 piece, ...) instead of one
	// call after the other.
	Interleave bool
	Usage      Usage

	// Status is an HTTP error status (400, 401, 429, 500...). The body is
	// {"error":{"message":ErrMessage,"type":ErrType,"param":null,"code":ErrCode}},
	// or ErrBody as it is (text/html) when set: a proxy's or web server's page.
	Status     int
	ErrMessage string
	ErrType    string
	ErrCode    string
	ErrBody    string

	// Wait, when not nil, holds the response until it is closed or the client goes
	// away (the request context is done), to test timeouts and cancellation: the
	// server stalls before sending any header.
	Wait <-chan struct{}
	// StallMidStream, in streaming mode and when not nil, sends the headers and
	// the first chunk (the assistant role and the first piece of Text), then holds
	// the rest until it is closed or the client goes away: a server that stops
	// mid-answer. A client that went away gets nothing more.
	StallMidStream <-chan struct{}

	// Header is added to the response, error or not (for example Retry-After).
	Header map[string]string
	// Finish overrides the finish_reason ("length", "content_filter").
	Finish string
	// NoFinish, in streaming mode, leaves out the chunk with the finish_reason.
	NoFinish bool
	// NoDone, in streaming mode, ends the body without "data: [DONE]".
	NoDone bool
	// JSON answers a streaming request with a plain chat.completion JSON body, as
	// a server that ignores "stream":true does.
	JSON bool
}

// Text returns a reply with plain assistant text.
func Text(s string) Reply { return Reply{Text: s} }

// Calls returns a reply that makes the given tool calls (parallel when several).
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is a ToolCall with the given name and JSON arguments and a generated id.
func Call(name, args string) ToolCall { return ToolCall{Name: name, Arguments: args} }

// Error returns an HTTP error reply with OpenAI's error body.
func Error(status int, message string) Reply {
	typ := "server_error"
	if status >= 400 && status < 500 {
		typ = "invalid_request_error"
	}
	return Reply{Status: status, ErrMessage: message, ErrType: typ}
}

// ContextLengthError returns the 400 error OpenAI sends when the prompt is too
// long (code "context_length_exceeded").
func ContextLengthError() Reply {
	return Reply{
		Status:     http.StatusBadRequest,
		ErrType:    "invalid_request_error",
		ErrCode:    "context_length_exceeded",
		ErrMessage: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens. Please reduce the length of the messages.",
	}
}

// Request is one recorded request.
type Request struct {
	Path   string
	Header http.Header
	// Raw is the body exactly as received.
	Raw []byte
	// Body is Raw decoded with go-openai's own types.
	Body openai.ChatCompletionRequest
	// JSON is Raw decoded generically, to assert on fields the typed form hides
	// (for example whether "content" is present on a message).
	JSON map[string]any
	// Arrived is when the request reached the server's handler: its headers
	// read, its body not yet.
	Arrived time.Time
}

// Messages returns the generic form of the request's messages.
func (r Request) Messages() []map[string]any {
	raw, _ := r.JSON["messages"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, m := range raw {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// ToolNames returns the names of the tools offered in the request, in order.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Body.Tools {
		if t.Function != nil {
			out = append(out, t.Function.Name)
		}
	}
	return out
}

// Server is the fake. All methods are safe for concurrent use.
type Server struct {
	srv   *httptest.Server
	conns atomic.Int64 // connections accepted

	fakemodel.Script[Request, Reply] // Enqueue, Handle, Requests, Forget

	mu     sync.Mutex
	nextID int
	models []string
	// entries and props: SetModelEntries, SetProps.
	entries []map[string]any
	props   map[string]any
	keys    []string // accepted Bearer keys (RequireKeys); nil accepts any

	embedReqs []openai.EmbeddingRequestStrings
	embedFn   func(string) []float32
	// transcript and transcribed serve the audio endpoint (audio.go).
	transcript  string
	transcribed []Transcribed
}

// New starts a server on 127.0.0.1 and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("openaitest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a server on 127.0.0.1 outside a test (BenchmarkPlatform in cmd/openbot drives it);
// the caller must Close it. The error is the listener's.
func Start() (*Server, error) {
	s := &Server{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.serveChat)
	mux.HandleFunc("POST /chat/completions", s.serveChat)
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /props", s.serveProps)
	mux.HandleFunc("POST /v1/embeddings", s.serveEmbeddings)
	mux.HandleFunc("POST /embeddings", s.serveEmbeddings)
	mux.HandleFunc("POST /v1/audio/transcriptions", s.serveAudio)
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: s.authorize(mux), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}}
	s.srv.Start()
	return s, nil
}

// Conns is how many connections the server has accepted so far.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Close shuts the server down (New does it when the test ends).
func (s *Server) Close() { s.srv.Close() }

// URL is the base URL for go-openai's ClientConfig.BaseURL ("http://127.0.0.1:port/v1").
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// RequireKeys makes every endpoint answer 401 with OpenAI's
// invalid_api_key error to a request whose "Authorization: Bearer <key>" is
// not one of keys; no keys accepts any again. Refused requests are not
// recorded.
func (s *Server) RequireKeys(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append([]string(nil), keys...)
}

func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		keys := s.keys
		s.mu.Unlock()
		if len(keys) > 0 && !slices.Contains(keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			writeError(w, Reply{Status: http.StatusUnauthorized, ErrType: "invalid_request_error", ErrCode: "invalid_api_key",
				ErrMessage: "Incorrect API key provided."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetModels makes GET /v1/models list ids (the OpenAI list shape); until it is
// called that endpoint answers 404, as servers that do not serve it do.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string{}, ids...)
	if s.models == nil {
		s.models = []string{}
	}
}

// SetModelEntries makes GET /v1/models list entries as they are: a
// server's own fields beside "id", such as vLLM's max_model_len,
// OpenRouter's context_length and top_provider, llama.cpp's meta. It
// replaces SetModels' list.
func (s *Server) SetModelEntries(entries ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append([]map[string]any{}, entries...)
}

// SetProps makes GET /props (llama.cpp's server properties, at the root,
// not under /v1) answer props; until it is called that endpoint answers 404.
func (s *Server) SetProps(props map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.props = props
}

func (s *Server) serveProps(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	props := s.props
	s.mu.Unlock()
	if props == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(props)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ids, data := s.models, s.entries
	s.mu.Unlock()
	if ids == nil && data == nil {
		http.NotFound(w, r)
		return
	}
	if data == nil {
		data = make([]map[string]any, 0, len(ids))
		for _, id := range ids {
			data = append(data, map[string]any{"id": id, "object": "model", "owned_by": "openaitest"})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

// Echo is the default reply: "echo: " followed by the text of the last user message.
func Echo(req Request) Reply { return Text("echo: " + LastUserText(req)) }

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, Error(http.StatusBadRequest, "cannot read body"))
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Arrived: arrived}
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		writeError(w, Error(http.StatusBadRequest, "invalid JSON body: "+err.Error()))
		return
	}
	_ = json.Unmarshal(raw, &req.JSON)
	reply := s.Next(req, Echo)
	if !waitctx.Closed(r.Context(), reply.Wait) {
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.Status != 0 {
		writeError(w, reply)
		return
	}
	reply = s.fill(reply, len(raw))
	if req.Body.Stream && !reply.JSON {
		s.writeStream(r.Context(), w, req, reply)
		return
	}
	s.writeJSON(w, req, reply)
}

// fill assigns tool call ids and estimates usage.
func (s *Server) fill(r Reply, reqBytes int) Reply {
	s.mu.Lock()
	calls := make([]ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			s.nextID++
			c.ID = fmt.Sprintf("call_%d", s.nextID)
		}
		calls[i] = c
	}
	s.mu.Unlock()
	r.ToolCalls = calls
	if r.Usage.PromptTokens == 0 {
		r.Usage.PromptTokens = max(1, reqBytes/4)
	}
	if r.Usage.CompletionTokens == 0 {
		n := len(r.Text)
		for _, c := range calls {
			n += len(c.Name) + len(c.Arguments)
		}
		r.Usage.CompletionTokens = max(1, n/4)
	}
	return r
}

func writeError(w http.ResponseWriter, r Reply) {
	if r.ErrBody != "" {
		fakemodel.WriteBody(w, r.Status, r.ErrBody)
		return
	}
	body := map[string]any{"error": map[string]any{
		"message": r.ErrMessage,
		"type":    r.ErrType,
		"param":   nil,
		"code":    nilIfEmpty(r.ErrCode),
	}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	_ = json.NewEncoder(w).Encode(body)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func finishReason(r Reply) string {
	if r.Finish != "" {
		return r.Finish
	}
	if len(r.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usageJSON(u Usage) map[string]any {
	m := map[string]any{
		"prompt_tokens":     u.PromptTokens,
		"completion_tokens": u.CompletionTokens,
		"total_tokens":      u.PromptTokens + u.CompletionTokens,
	}
	if u.CachedTokens > 0 {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": u.CachedTokens}
	}
	return m
}

func (s *Server) writeJSON(w http.ResponseWriter, req Request, r Reply) {
	msg := map[string]any{"role": "assistant", "content": nilIfEmpty(r.Text)}
	if len(r.ToolCalls) > 0 {
		calls := make([]any, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			calls[i] = map[string]any{
				"id":       c.ID,
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
			}
		}
		msg["tool_calls"] = calls
	}
	body := map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   req.Body.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(r), "logprobs": nil}},
		"usage":   usageJSON(r.Usage),
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) writeStream(ctx context.Context, w http.ResponseWriter, req Request, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id":      "chatcmpl-fake",
			"object":  "chat.completion.chunk",
			"created": 1700000000,
			"model":   req.Body.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}

	pieces := fakemodel.Split(r.Text, 4)
	first := ""
	if len(pieces) > 0 {
		first, pieces = pieces[0], pieces[1:]
	}
	send(chunk(map[string]any{"role": "assistant", "content": first}, nil))
	if !waitctx.Closed(ctx, r.StallMidStream) {
		return
	}
	for _, piece := range pieces {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	for _, d := range toolDeltas(r.ToolCalls, r.Interleave) {
		send(chunk(map[string]any{"tool_calls": []any{d}}, nil))
	}
	if !r.NoFinish {
		send(chunk(map[string]any{}, finishReason(r)))
	}
	// The usage chunk comes last with empty choices, as OpenAI sends it for
	// stream_options.include_usage.
	send(map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion.chunk",
		"created": 1700000000,
		"model":   req.Body.Model,
		"choices": []any{},
		"usage":   usageJSON(r.Usage),
	})
	if !r.NoDone {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	if flusher != nil {
		flusher.Flush()
	}
}

// toolDeltas returns the tool_calls delta objects in send order: for every call a
// header (index, id, type, name, empty arguments) then its arguments in pieces.
func toolDeltas(calls []ToolCall, interleave bool) []map[string]any {
	per := make([][]map[string]any, len(calls))
	for i, c := range calls {
		per[i] = append(per[i], map[string]any{
			"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		})
		for _, piece := range fakemodel.Split(c.Arguments, 3) {
			per[i] = append(per[i], map[string]any{"index": i, "function": map[string]any{"arguments": piece}})
		}
	}
	var out []map[string]any
	if !interleave {
		for _, p := range per {
			out = append(out, p...)
		}
		return out
	}
	for step := 0; ; step++ {
		added := false
		for _, p := range per {
			if step < len(p) {
				out = append(out, p[step])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// LastUserText returns the content of the last user message of req ("" if none).
func LastUserText(req Request) string {
	last := ""
	for _, m := range req.Body.Messages {
		if m.Role == openai.ChatMessageRoleUser {
			last = m.Content
		}
	}
	return last
}
