// Package anthropictest is a fake Anthropic Messages API server for tests.
//
// It speaks the real wire protocol of POST /v1/messages: with "stream": true,
// server-sent events named as Anthropic names them (message_start,
// content_block_start, ping, content_block_delta with text_delta and
// input_json_delta, content_block_stop, message_delta with the stop_reason and
// usage, message_stop, and an error event mid-stream); without it, one Message
// JSON body. HTTP errors carry the real error shape
// ({"type":"error","error":{"type":...,"message":...},"request_id":...}) and a
// request-id header. It listens on 127.0.0.1 only, so the official SDK's code
// paths run without the internet.
//
// Replies are scripted as in openaitest: a FIFO queue (Enqueue), else a handler
// (Handle), else an echo of the last user text. Every request is recorded, raw
// and decoded, for assertions, cache_control breakpoints included.
package anthropictest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"openbot/agents/internal/fakemodel"
	"openbot/internal/waitctx"
)

// ToolCall is one tool_use block the fake model sends.
type ToolCall struct {
	ID    string // defaults to "toolu_<n>"
	Name  string
	Input string // JSON object text, streamed as input_json_delta pieces
}

// Usage is what a reply reports; zero InputTokens and OutputTokens are
// replaced by a rough estimate (request bytes/4, reply bytes/4, at least 1).
// InputTokens exclude the cache's, as the API counts them.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int // cache_read_input_tokens
	CacheWriteTokens int // cache_creation_input_tokens
}

// Reply is one scripted response: Status != 0 is an HTTP error with
// Anthropic's error body; otherwise Text and ToolCalls make the answer (text
// block first, then one tool_use block per call).
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage

	// Status is an HTTP error status (400, 401, 429, 500, 529...). ErrType is
	// the error type (default by status: rate_limit_error, api_error,
	// overloaded_error, invalid_request_error...), ErrMessage its message; ErrBody,
	// when set, is sent as it is (text/html) instead: a proxy's page.
	Status     int
	ErrType    string
	ErrMessage string
	ErrBody    string
	// StreamError, in streaming mode, sends an error event of this type after the
	// first text delta (the API's "overloaded_error" mid-stream) and ends.
	StreamError string

	// Header is added to the response, error or not (retry-after).
	Header map[string]string
	// StopReason overrides the stop_reason (default end_turn, or tool_use with
	// tool calls): "max_tokens", "refusal".
	StopReason string
	// NoStop, in streaming mode, ends the body before message_stop; NoDelta
	// leaves out message_delta (no stop_reason) as well.
	NoStop, NoDelta bool
	// Wait holds the response, before any header, until it is closed or the
	// client goes away. StallMidStream, in streaming mode with Text, sends
	// message_start and the first text delta, then holds the rest the same way.
	Wait           <-chan struct{}
	StallMidStream <-chan struct{}
	// Model is the model the answer says served it; default the request's.
	Model string
}

// Text returns a reply with plain text.
func Text(s string) Reply { return Reply{Text: s} }

// Calls returns a reply that makes the given tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is a ToolCall with a generated id.
func Call(name, input string) ToolCall { return ToolCall{Name: name, Input: input} }

// Error returns an HTTP error reply of the type Anthropic uses for status.
func Error(status int, message string) Reply {
	return Reply{Status: status, ErrMessage: message}
}

// errorType is Anthropic's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// Block is one content block of a request, decoded. Content of a tool_result
// is its text (a string, or its text blocks joined).
type Block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Source       *Source         `json:"source,omitempty"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// ResultText is a tool_result block's content as text.
func (b Block) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var blocks []Block
	_ = json.Unmarshal(b.Content, &blocks)
	var parts []string
	for _, c := range blocks {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "")
}

// Source is an image block's source.
type Source struct {
	Type      string `json:"type"` // base64, url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// CacheControl is a cache breakpoint.
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// Message is one message of a request; string content becomes one text block.
type Message struct {
	Role    string
	Content []Block
}

// UnmarshalJSON accepts content as a string or as blocks.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []Block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// Tool is one tool definition of a request.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// Body is a request body, decoded.
type Body struct {
	Model       string    `json:"model"`
	MaxTokens   int       `json:"max_tokens"`
	Stream      bool      `json:"stream"`
	System      []Block   `json:"-"` // a string system prompt becomes one block
	Messages    []Message `json:"messages"`
	Tools       []Tool    `json:"tools"`
	Temperature *float64  `json:"temperature"`
}

// Request is one recorded request.
type Request struct {
	Path   string
	Header http.Header
	Raw    []byte
	Body   Body
	JSON   map[string]any
}

// Breakpoints lists where the request put cache_control, in request order:
// "tools[i]", "system[i]", "messages[i].content[j]".
func (r Request) Breakpoints() []string {
	var out []string
	for i, t := range r.Body.Tools {
		if t.CacheControl != nil {
			out = append(out, fmt.Sprintf("tools[%d]", i))
		}
	}
	for i, b := range r.Body.System {
		if b.CacheControl != nil {
			out = append(out, fmt.Sprintf("system[%d]", i))
		}
	}
	for i, m := range r.Body.Messages {
		for j, b := range m.Content {
			if b.CacheControl != nil {
				out = append(out, fmt.Sprintf("messages[%d].content[%d]", i, j))
			}
		}
	}
	return out
}

// SystemText is the system prompt's text.
func (r Request) SystemText() string {
	var parts []string
	for _, b := range r.Body.System {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// LastUserText is the text of the last user message's text blocks.
func (r Request) LastUserText() string {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		m := r.Body.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		for _, b := range m.Content {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// Server is the fake. All methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	fakemodel.Script[Request, Reply] // Enqueue, Handle, Requests, Forget

	mu     sync.Mutex
	key    string // required x-api-key; "" accepts any
	nextID int
	models []string // GET /v1/models (SetModels)
	// inputTokens: max_input_tokens by model id (SetMaxInputTokens).
	inputTokens map[string]int
}

// New starts a server on 127.0.0.1 and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("anthropictest: listen: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.serveMessages)
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /v1/models/{id}", s.serveModel)
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL for the SDK (option.WithBaseURL): "http://127.0.0.1:port".
func (s *Server) URL() string { return s.srv.URL }

// RequireKey makes requests without x-api-key: key fail with 401
// authentication_error, as the API does.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// SetModels makes GET /v1/models list ids in the API's shape (data of
// {type: model, id, display_name}, has_more false); until it is called the
// list is empty. The key RequireKey set is checked as for messages.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
}

// SetMaxInputTokens makes GET /v1/models/{id} answer the model's info in the
// API's shape with max_input_tokens n (0 leaves the field out); a model
// without it answers 404 not_found_error.
func (s *Server) SetMaxInputTokens(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inputTokens == nil {
		s.inputTokens = map[string]int{}
	}
	s.inputTokens[id] = n
}

func (s *Server) serveModel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key := s.key
	n, ok := s.inputTokens[r.PathValue("id")]
	s.mu.Unlock()
	if key != "" && r.Header.Get("X-Api-Key") != key {
		writeError(w, Reply{Status: http.StatusUnauthorized, ErrMessage: "invalid x-api-key"})
		return
	}
	if !ok {
		writeError(w, Reply{Status: http.StatusNotFound, ErrMessage: "model: " + r.PathValue("id")})
		return
	}
	m := map[string]any{"type": "model", "id": r.PathValue("id"), "display_name": r.PathValue("id"), "created_at": "2025-01-01T00:00:00Z"}
	if n > 0 {
		m["max_input_tokens"], m["max_tokens"] = n, 64000
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key, ids := s.key, s.models
	s.mu.Unlock()
	if key != "" && r.Header.Get("X-Api-Key") != key {
		writeError(w, Reply{Status: http.StatusUnauthorized, ErrMessage: "invalid x-api-key"})
		return
	}
	data := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"})
	}
	first, last := "", ""
	if len(ids) > 0 {
		first, last = ids[0], ids[len(ids)-1]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, Error(http.StatusBadRequest, "cannot read body"))
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	if err := decode(raw, &req); err != nil {
		writeError(w, Error(http.StatusBadRequest, "invalid JSON body: "+err.Error()))
		return
	}
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	if key != "" && r.Header.Get("X-Api-Key") != key {
		s.Record(req)
		writeError(w, Reply{Status: http.StatusUnauthorized, ErrMessage: "invalid x-api-key"})
		return
	}
	reply := s.Next(req, func(req Request) Reply { return Text("echo: " + req.LastUserText()) })
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
	reply = s.fill(reply, req, len(raw))
	if req.Body.Stream {
		s.writeStream(r.Context(), w, reply)
		return
	}
	writeJSON(w, reply)
}

// decode reads a request body; "system" may be a string or text blocks.
func decode(raw []byte, req *Request) error {
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		return err
	}
	_ = json.Unmarshal(raw, &req.JSON)
	var sys struct {
		System json.RawMessage `json:"system"`
	}
	_ = json.Unmarshal(raw, &sys)
	if len(sys.System) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(sys.System, &s) == nil {
		req.Body.System = []Block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(sys.System, &req.Body.System)
}

// fill assigns tool ids, the model and estimated usage.
func (s *Server) fill(r Reply, req Request, reqBytes int) Reply {
	s.mu.Lock()
	calls := make([]ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			s.nextID++
			c.ID = fmt.Sprintf("toolu_%02d", s.nextID)
		}
		calls[i] = c
	}
	s.mu.Unlock()
	r.ToolCalls = calls
	if r.Model == "" {
		r.Model = req.Body.Model
	}
	if r.Usage.InputTokens == 0 {
		r.Usage.InputTokens = max(1, reqBytes/4)
	}
	if r.Usage.OutputTokens == 0 {
		n := len(r.Text)
		for _, c := range calls {
			n += len(c.Name) + len(c.Input)
		}
		r.Usage.OutputTokens = max(1, n/4)
	}
	if r.StopReason == "" {
		r.StopReason = "end_turn"
		if len(calls) > 0 {
			r.StopReason = "tool_use"
		}
	}
	return r
}

func writeError(w http.ResponseWriter, r Reply) {
	w.Header().Set("request-id", "req_fake")
	if r.ErrBody != "" {
		fakemodel.WriteBody(w, r.Status, r.ErrBody)
		return
	}
	typ := r.ErrType
	if typ == "" {
		typ = errorType(r.Status)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	_ = json.NewEncoder(w).Encode(errorBody(typ, r.ErrMessage))
}

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"}
}

func usageJSON(u Usage, withInput bool) map[string]any {
	m := map[string]any{"output_tokens": u.OutputTokens}
	if withInput {
		m["input_tokens"] = u.InputTokens
		m["cache_read_input_tokens"] = u.CacheReadTokens
		m["cache_creation_input_tokens"] = u.CacheWriteTokens
	}
	return m
}

func contentJSON(r Reply) []any {
	var out []any
	if r.Text != "" {
		out = append(out, map[string]any{"type": "text", "text": r.Text})
	}
	for _, c := range r.ToolCalls {
		in := json.RawMessage(c.Input)
		if !json.Valid(in) {
			in = json.RawMessage(`{}`)
		}
		out = append(out, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": in})
	}
	return out
}

func writeJSON(w http.ResponseWriter, r Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": r.Model,
		"content": contentJSON(r), "stop_reason": r.StopReason, "stop_sequence": nil,
		"usage": usageJSON(r.Usage, true),
	})
}

func (s *Server) writeStream(ctx context.Context, w http.ResponseWriter, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := usageJSON(r.Usage, true)
	start["output_tokens"] = 1
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": r.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	send("ping", map[string]any{"type": "ping"})
	idx := 0
	if r.Text != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for i, piece := range fakemodel.Split(r.Text, 4) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "text_delta", "text": piece}})
			if i > 0 {
				continue
			}
			if r.StreamError != "" {
				send("error", errorBody(r.StreamError, "Overloaded"))
				return
			}
			if !waitctx.Closed(ctx, r.StallMidStream) {
				return
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for _, c := range r.ToolCalls {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, piece := range fakemodel.Split(c.Input, 3) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if r.NoDelta {
		return
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": r.StopReason, "stop_sequence": nil}, "usage": usageJSON(r.Usage, false)})
	if r.NoStop {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}
