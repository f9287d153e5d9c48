package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// run is the state of one Execute call.
type run struct {
	agent *Agent
	job   *core.Job
	pc    *providerClient
	model string
	tools []Tool
	in    promptInput
	max   int

	transcript []openai.ChatCompletionMessage // this run's assistant and tool messages
	usage      core.Usage
	trimmed    bool // the one context-length retry was used
}

// turn is one assembled model response.
type turn struct {
	content string
	calls   []openai.ToolCall
	finish  string
	usage   openai.Usage
}

// loop calls the model until it answers without tool calls (seed §6).
func (r *run) loop(ctx context.Context) (string, error) {
	defs := toolDefs(r.tools)
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("run stopped: %w", context.Cause(ctx))
		}
		if r.usage.ModelCalls >= r.max {
			return "", fmt.Errorf("%w: the run made %d model calls without finishing", ErrModelCallLimit, r.max)
		}
		msgs := r.messages()
		start := r.agent.opts.Clock.Now()
		t, err := r.callModel(ctx, msgs, defs)
		dur := r.agent.opts.Clock.Now().Sub(start)
		r.usage.ModelCalls++
		r.usage.PromptTokens += t.usage.PromptTokens
		r.usage.CompletionTokens += t.usage.CompletionTokens
		ev := map[string]any{
			"model": r.model, "provider": r.pc.name, "messages": len(msgs),
			"prompt_tokens": t.usage.PromptTokens, "completion_tokens": t.usage.CompletionTokens,
			"duration_ms": dur.Milliseconds(), "finish_reason": t.finish, "tool_calls": len(t.calls),
		}
		if err != nil {
			ev["error"] = err.Error()
		}
		r.event(ctx, "model_call", ev)
		if err != nil {
			var me *ModelError
			if errors.As(err, &me) && me.ContextLength() && !r.trimmed {
				r.trimmed = true
				if r.trim() {
					r.agent.log.Info("context length exceeded; retrying with trimmed history",
						"bot", r.job.Bot.Handle, "run", r.job.Run.ID)
					continue
				}
			}
			return "", err
		}
		assistant := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: t.content, ToolCalls: t.calls}
		r.transcript = append(r.transcript, assistant)
		r.checkpoint(ctx)
		if len(t.calls) == 0 {
			return strings.TrimSpace(t.content), nil
		}
		r.transcript = append(r.transcript, r.runTools(ctx, t.calls)...)
		r.checkpoint(ctx)
	}
}

// messages is the full request: system prompt, unrolled history, transcript.
func (r *run) messages() []openai.ChatCompletionMessage {
	hist := render(r.in.view, r.job.Bot, r.agent.opts.Limits.HistoryTokenBudget*4)
	out := make([]openai.ChatCompletionMessage, 0, 1+len(hist)+len(r.transcript))
	out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: systemPrompt(r.in)})
	out = append(out, hist...)
	return append(out, r.transcript...)
}

// trim shrinks the request after a context-length error: it halves the unrolled
// history, else drops the older half of this run's tool exchanges (an assistant
// message with tool calls always goes together with its tool results).
func (r *run) trim() bool {
	if r.in.view.trim() {
		return true
	}
	// Units: indexes where an assistant message starts.
	var starts []int
	for i, m := range r.transcript {
		if m.Role == openai.ChatMessageRoleAssistant {
			starts = append(starts, i)
		}
	}
	if len(starts) < 2 {
		return false
	}
	cut := starts[len(starts)/2]
	r.transcript = r.transcript[cut:]
	return true
}

// callModel makes one streaming chat completion and assembles the response.
func (r *run) callModel(ctx context.Context, msgs []openai.ChatCompletionMessage, defs []openai.Tool) (turn, error) {
	cctx, cancel := context.WithTimeout(ctx, r.agent.opts.RequestTimeout)
	defer cancel()
	req := openai.ChatCompletionRequest{
		Model:         r.model,
		Messages:      msgs,
		Tools:         defs,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	stream, err := r.pc.client.CreateChatCompletionStream(cctx, req)
	if err != nil {
		return turn{}, r.modelErr(ctx, cctx, err)
	}
	defer stream.Close()
	var (
		t       turn
		content strings.Builder
		asm     callAssembler
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.content = content.String()
			return t, r.modelErr(ctx, cctx, err)
		}
		if chunk.Usage != nil {
			t.usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			content.WriteString(ch.Delta.Content)
			for _, d := range ch.Delta.ToolCalls {
				asm.add(d)
			}
			if ch.FinishReason != "" {
				t.finish = string(ch.FinishReason)
			}
		}
	}
	t.content = content.String()
	t.calls = asm.calls()
	return t, nil
}

// callAssembler joins streamed tool-call deltas by their index, so deltas of
// several calls may arrive interleaved. Deltas without an index (some servers)
// continue the latest call unless they carry a new id.
type callAssembler struct {
	order []int
	byIdx map[int]*partialCall
	last  int
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (c *callAssembler) add(d openai.ToolCall) {
	if c.byIdx == nil {
		c.byIdx = map[int]*partialCall{}
	}
	idx := c.last
	switch {
	case d.Index != nil:
		idx = *d.Index
	case len(c.order) == 0:
		idx = 0
	case d.ID != "" && c.byIdx[c.last].id != "" && d.ID != c.byIdx[c.last].id:
		idx = slices.Max(c.order) + 1
	}
	acc, ok := c.byIdx[idx]
	if !ok {
		acc = &partialCall{}
		c.byIdx[idx] = acc
		c.order = append(c.order, idx)
	}
	c.last = idx
	if d.ID != "" {
		acc.id = d.ID
	}
	switch name := d.Function.Name; {
	case name == "" || name == acc.name:
	case acc.name == "":
		acc.name = name
	default:
		acc.name += name
	}
	acc.args.WriteString(d.Function.Arguments)
}

// calls returns the assembled calls in index order, with ids and arguments filled.
func (c *callAssembler) calls() []openai.ToolCall {
	if len(c.order) == 0 {
		return nil
	}
	out := make([]openai.ToolCall, 0, len(c.order))
	for n, i := range slices.Sorted(slices.Values(c.order)) {
		p := c.byIdx[i]
		tc := openai.ToolCall{ID: p.id, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: p.name, Arguments: p.args.String()}}
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d", n)
		}
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			tc.Function.Arguments = "{}"
		}
		out = append(out, tc)
	}
	return out
}

func toolDefs(tools []Tool) []openai.Tool {
	out := make([]openai.Tool, 0, len(tools))
	for _, t := range tools {
		schema := t.Schema()
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name(), Description: t.Description(), Parameters: schema,
		}})
	}
	return out
}

// event records a run event; a failure is logged, not fatal.
func (r *run) event(ctx context.Context, typ string, payload any) {
	if err := r.job.Env.RecordEvent(ctx, typ, payload); err != nil {
		r.agent.log.Warn("record run event", "run", r.job.Run.ID, "type", typ, "err", err)
	}
}

// checkpointData is the transcript saved on the run after every step.
type checkpointData struct {
	Model      string                         `json:"model"`
	History    []core.MessageID               `json:"history"` // thread messages shown
	Transcript []openai.ChatCompletionMessage `json:"transcript"`
	Usage      core.Usage                     `json:"usage"`
}

func (r *run) checkpoint(ctx context.Context) {
	ids := make([]core.MessageID, len(r.in.view.shown))
	for i, m := range r.in.view.shown {
		ids[i] = m.ID
	}
	raw, err := json.Marshal(checkpointData{Model: r.model, History: ids, Transcript: r.transcript, Usage: r.usage})
	if err == nil {
		err = r.job.Env.Checkpoint(ctx, raw)
	}
	if err != nil {
		r.agent.log.Warn("checkpoint run", "run", r.job.Run.ID, "err", err)
	}
}

// ModelError is a failed model call, with a short message that is safe to show in
// the thread: the HTTP status and the server's message, never the API key.
type ModelError struct {
	Provider string
	Status   int    // HTTP status; 0 when no response arrived
	Code     string // the server's error code, e.g. "context_length_exceeded"
	Message  string
}

// Error implements error.
func (e *ModelError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("model call failed (%s): %s", e.Provider, e.Message)
	}
	return fmt.Sprintf("model call failed (%s): status %d: %s", e.Provider, e.Status, e.Message)
}

// ContextLength reports whether the prompt was too long for the model.
func (e *ModelError) ContextLength() bool {
	if e.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	return e.Status == 400 && (strings.Contains(m, "context length") || strings.Contains(m, "context_length") ||
		strings.Contains(m, "maximum context") || strings.Contains(m, "too many tokens"))
}

// modelErr turns a go-openai error into a ModelError or a timeout/cancellation
// error. ctx is the run's context and cctx the call's.
func (r *run) modelErr(ctx, cctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("run stopped during a model call: %w", context.Cause(ctx))
	}
	me := &ModelError{Provider: r.pc.name}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case cctx.Err() != nil:
		me.Message = fmt.Sprintf("no complete answer within %s", r.agent.opts.RequestTimeout)
	case errors.As(err, &apiErr):
		me.Status = apiErr.HTTPStatusCode
		me.Message = apiErr.Message
		if s, ok := apiErr.Code.(string); ok {
			me.Code = s
		} else if apiErr.Code != nil {
			me.Code = fmt.Sprint(apiErr.Code)
		}
	case errors.As(err, &reqErr):
		me.Status = reqErr.HTTPStatusCode
		me.Message = strings.TrimSpace(string(reqErr.Body))
		if me.Message == "" {
			me.Message = reqErr.HTTPStatus
		}
	default:
		me.Message = err.Error()
	}
	me.Message = r.redact(me.Message)
	return me
}

// redact removes the API key from text and bounds its length.
func (r *run) redact(s string) string {
	if k := r.pc.prov.APIKey; len(k) >= 4 {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	if len(s) > 300 {
		s = cutString(s, 300) + "..."
	}
	return s
}

// since is a small helper for step durations.
func (r *run) since(t time.Time) time.Duration { return r.agent.opts.Clock.Now().Sub(t) }
