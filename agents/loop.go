package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// run is the state of one Execute call.
type run struct {
	agent *Agent
	job   *core.Job
	// links is the bot's fallback chain; pc and model are the link of the
	// current (or last) model call, key the label of its API key and
	// fallback whether it is not the chain's first.
	links    []link
	pc       *providerClient
	model    string
	key      string
	fallback bool
	served   string // the model the server named for the last call, when not model
	tools    []Tool
	in       promptInput
	max      int

	// prompt is the system prompt and history restored from a checkpoint (a
	// resumed run); nil builds them from in.
	prompt     []openai.ChatCompletionMessage
	transcript []openai.ChatCompletionMessage // this run's assistant and tool messages
	pending    *pendingTurn                   // tool calls of the last turn not all resolved
	usage      core.Usage                     // cumulative over the run's segments
	base       core.Usage                     // usage before this Execute call
	// ceiling caps the input tokens of this run's requests after the server
	// refused one as too long (0: none).
	ceiling int
	// mu guards pending and checkpoints while tool calls run concurrently.
	mu sync.Mutex
	// down says why, by tool source, a source the bot selects is not available
	// to this run (awaitSources).
	down map[string]string
	// last is the step of the call that gave the reply, for core to store with
	// the run's settling (lastStep).
	last *core.Step
	// imgs are the image parts of a vision bot's request, read once (vision.go).
	imgs     []openai.ChatMessagePart
	imgsOnce sync.Once
}

// loop calls the model until it answers without tool calls (seed §6), or a tool
// call waits for a person: then it returns the pause.
func (r *run) loop(ctx context.Context) (string, *core.Pause, error) {
	defs := toolDefs(r.tools)
	for {
		if err := ctx.Err(); err != nil {
			return "", nil, fmt.Errorf("run stopped: %w", context.Cause(ctx))
		}
		if r.pending != nil {
			p, err := r.advance(ctx)
			if err != nil || p != nil {
				return "", p, err
			}
			continue
		}
		if r.usage.ModelCalls >= r.max {
			return "", nil, fmt.Errorf("%w: the run made %d model calls without finishing", ErrModelCallLimit, r.max)
		}
		r.editIfLarge()
		limit := inputLimit(r.pc, r.job.Bot)
		if r.ceiling > 0 && (limit == 0 || r.ceiling < limit) {
			limit = r.ceiling
		}
		msgs, stable, ok := r.fit(limit, defs)
		if !ok {
			return "", nil, r.tooLong(estimateTokens(msgs, defs))
		}
		if err := r.beforeCall(ctx, msgs, defs); err != nil {
			return "", nil, err
		}
		start := r.agent.opts.Clock.Now()
		t, retries, err := r.callModel(ctx, msgs, stable, defs)
		dur := r.agent.opts.Clock.Now().Sub(start)
		r.usage.ModelCalls++
		r.usage.PromptTokens += t.Usage.InputTokens
		r.usage.CompletionTokens += t.Usage.OutputTokens
		ev := map[string]any{
			"model": r.model, "provider": r.pc.name, "messages": len(msgs),
			"prompt_tokens": t.Usage.InputTokens, "completion_tokens": t.Usage.OutputTokens,
			"duration_ms": dur.Milliseconds(), "finish_reason": t.Finish, "tool_calls": len(t.Calls),
		}
		if t.Usage.CacheReadTokens > 0 {
			ev["cache_read_tokens"] = t.Usage.CacheReadTokens
		}
		if t.Usage.CacheWriteTokens > 0 {
			ev["cache_write_tokens"] = t.Usage.CacheWriteTokens
		}
		r.served = ""
		if t.Model != "" && t.Model != r.model {
			r.served = t.Model
			ev["served_by"] = t.Model
		}
		if r.key != "" {
			ev["key"] = r.key
		}
		if r.fallback {
			ev["fallback"] = true
		}
		if retries > 0 {
			ev["retries"] = retries
		}
		if err != nil {
			ev["error"] = err.Error()
		}
		r.job.Observer().ModelCall(r.pc.name, r.model, dur, t.Usage.InputTokens, t.Usage.OutputTokens, err != nil)
		if err != nil {
			r.recordStep(ctx, t.Usage, ev, false)
			var me *ModelError
			if errors.As(err, &me) && me.ContextLength() {
				// The server counts differently: shorten the request by one
				// step, and from now on keep this run's requests that short.
				size := estimateTokens(msgs, defs)
				if !r.shrink() {
					return "", nil, r.tooLong(size)
				}
				shorter, _ := r.messages()
				r.ceiling = estimateTokens(shorter, defs)
				r.agent.log.Info("context length exceeded; retrying with a shorter request",
					"bot", r.job.Bot.Handle, "run", r.job.Run.ID, "tokens", size, "ceiling", r.ceiling)
				continue
			}
			return "", nil, err
		}
		assistant := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: t.Text, ToolCalls: t.Calls}
		r.transcript = append(r.transcript, assistant)
		if len(t.Calls) == 0 {
			r.lastStep(ctx, t.Usage, ev)
			return strings.TrimSpace(t.Text), nil, nil
		}
		r.showWorking(t.Calls)
		r.pending = r.classify(t.Calls)
		r.recordStep(ctx, t.Usage, ev, true)
	}
}

// showText streams the turn's text so far (core.TextStreamer, DESIGN.md §6; not stored, §7):
// only shown through message edits, never stored or recorded per token.
func (r *run) showText(text string) {
	if ts, ok := r.job.Env.(core.TextStreamer); ok {
		ts.StreamText(text)
	}
}

// showWorking replaces the streamed text with "working: <tools>" for a tool round.
func (r *run) showWorking(calls []openai.ToolCall) {
	ts, ok := r.job.Env.(core.TextStreamer)
	if !ok {
		return
	}
	names := make([]string, 0, len(calls))
	for _, c := range calls {
		if !slices.Contains(names, c.Function.Name) {
			names = append(names, c.Function.Name)
		}
	}
	ts.StreamWorking(names...)
}

// promptMessages are the system prompt and the unrolled history: restored from
// the checkpoint for a resumed run, else built from the thread.
func (r *run) promptMessages() []openai.ChatCompletionMessage {
	if r.prompt != nil {
		return r.prompt
	}
	hist := render(r.in.view, r.job.Bot, r.agent.opts.Limits.HistoryTokenBudget*4)
	if tc := turnContext(r.in); tc != "" {
		// render ends with a user message: the newest turn.
		last := &hist[len(hist)-1]
		last.Content = tc + "\n" + last.Content
	}
	out := make([]openai.ChatCompletionMessage, 0, 1+len(hist))
	out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: systemPrompt(r.in)})
	return append(out, hist...)
}

// messages is the full request: system prompt, unrolled history, transcript;
// and how many leading messages are stable (ChatRequest.StableEnd): all but
// the newest turn of the prompt, which carries turnContext.
func (r *run) messages() ([]openai.ChatCompletionMessage, int) {
	p := r.promptMessages()
	out := make([]openai.ChatCompletionMessage, 0, len(p)+len(r.transcript))
	out = append(out, withImages(p, len(p)-1, r.images())...) // vision.go; never checkpointed
	return append(out, r.transcript...), len(p) - 1
}

// callModel makes one streaming model call and returns the answer and how
// many times the request was retried (see transport). It walks the bot's
// fallback chain (chain.go): the profiles not cooling down in order, each
// failure that another profile may not share (fallbackReason) cooling its
// profile down and moving on to the next. The retry and the fallback are one
// policy: while another profile may answer, a profile gets one attempt (a key
// refused or rate-limited gives way to its next key at once); the last one
// retries as the transport does. Streamed text restarts with the profile that
// takes over (the stream shows the whole answer so far, so the partial one is
// replaced, not posted twice). When every profile failed the error names each.
// A stream cut short (ChatAnswer.Incomplete), an answer cut off at the token
// limit, a filtered answer and an empty answer are *ModelErrors that say so.
func (r *run) callModel(ctx context.Context, msgs []openai.ChatCompletionMessage, stable int, defs []openai.Tool) (ChatAnswer, int, error) {
	links, err := r.agent.usable(ctx, r.links)
	if err != nil {
		return ChatAnswer{}, 0, err
	}
	var (
		tried   []string
		retries int
	)
	for i, l := range links {
		r.pc, r.model, r.fallback = l.pc, l.model, l.pc != r.links[0].pc
		last := i == len(links)-1
		t, n, why, err := r.callLink(ctx, msgs, stable, defs, last)
		retries += n
		if err == nil {
			l.pc.cd.clear(l.pc.id)
			return t, retries, nil
		}
		if why == "" {
			return t, retries, err
		}
		tried = append(tried, fmt.Sprintf("llm profile %q (%s)", l.pc.name, why))
		if last {
			var me *ModelError
			if len(tried) > 1 && errors.As(err, &me) {
				err = chainDown(tried, me)
			}
			return t, retries, err
		}
		r.agent.log.Warn("model call failed; trying the next llm profile", "bot", r.job.Bot.Handle, "run", r.job.Run.ID,
			"profile", l.pc.name, "model", l.model, "reason", why, "next", links[i+1].pc.name, "err", err)
	}
	return ChatAnswer{}, retries, errors.New("agents: empty fallback chain") // not reached: links is never empty
}

// callLink makes the call on the link in r.pc and r.model. A stream that
// stalls midway (no bytes for the provider's idle timeout) is asked again
// from the start while the retry budget lasts, which only the chain's last
// usable profile has. why is fallbackReason's when the call failed, and the
// profile is then cooling down.
func (r *run) callLink(ctx context.Context, msgs []openai.ChatCompletionMessage, stable int, defs []openai.Tool, last bool) (ChatAnswer, int, string, error) {
	cctx, cancel := context.WithTimeout(ctx, r.pc.prov.RequestTimeout)
	defer cancel()
	limit := 0
	if last {
		limit = r.pc.tr.retries
	}
	si := &streamInfo{bo: newBackoff(r.agent.opts.retryInitial), limit: &limit}
	cctx = withStreamInfo(cctx, si)
	req := ChatRequest{Model: r.model, Messages: msgs, StableEnd: stable, Tools: defs, Stream: true}
	modelParams(&req, r.job.Bot)
	for {
		var content strings.Builder
		req.OnText = func(delta string) {
			content.WriteString(delta)
			r.showText(content.String())
		}
		t, err := r.pc.api.Chat(cctx, req)
		r.key = cmp.Or(si.keyLabel(), r.pc.label)
		var stall *StallError
		if err != nil && errors.As(err, &stall) && stall.MidStream && ctx.Err() == nil && cctx.Err() == nil {
			used := int(si.retries.Load())
			wait := si.bo.NextBackOff()
			if dl, ok := cctx.Deadline(); used < limit && (!ok || time.Until(dl) > wait) {
				r.pc.tr.log.Info("model request failed; retrying", "status", http.StatusOK, "err", stall.Error(),
					"attempt", used+1, "wait", wait)
				si.retries.Add(1)
				if err := r.agent.opts.sleep(cctx, wait); err == nil {
					continue
				}
			}
		}
		retries := int(si.retries.Load())
		if err != nil {
			why, cool := fallbackReason(ctx, cctx, err, si)
			if why != "" {
				r.pc.cd.set(r.pc.id, cool, why)
			}
			return t, retries, why, r.modelErr(ctx, cctx, err, retries)
		}
		err = r.checkTurn(ctx, t)
		if err != nil && t.Incomplete != "" && ctx.Err() == nil {
			why := "its stream ended early"
			r.pc.cd.set(r.pc.id, busyCooldown, why)
			return t, retries, why, err
		}
		return t, retries, "", err
	}
}

// checkTurn reports a complete-looking stream that is not a usable answer.
func (r *run) checkTurn(ctx context.Context, t ChatAnswer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run stopped during a model call: %w", context.Cause(ctx))
	}
	var msg string
	switch {
	case t.Incomplete != "":
		msg = "the stream ended early: " + t.Incomplete
	case t.Finish == FinishLength:
		msg = fmt.Sprintf("the model's answer was cut off (%s); raise the model's output token limit or ask for a shorter answer", t.Reason)
	case t.Finish == FinishContentFilter:
		msg = fmt.Sprintf("the model's answer was withheld by its content filter (%s)", t.Reason)
	case len(t.Calls) == 0 && strings.TrimSpace(t.Text) == "":
		msg = "the model returned an empty answer (no text and no tool calls)"
	default:
		return nil
	}
	return &ModelError{Provider: r.pc.name, Message: msg, Summary: msg}
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
		r.warnUnlessStopped(ctx, "record run event", "run", r.job.Run.ID, "type", typ, "err", err)
	}
}

// ModelError is a failed model call. Error() is the detail for the log and the
// stored run error (the HTTP status and the server's message, or the network
// error with its address), never the API key or URL credentials; Notice() says
// the cause in words for the thread (core.PeopleError, DESIGN.md §9).
type ModelError struct {
	Provider string
	Status   int    // HTTP status; 0 when no response arrived
	Code     string // the server's error code, e.g. "context_length_exceeded"
	Message  string // the detail, redacted (core.Redact)
	// Summary is the cause in words for people in the thread, without addresses
	// or credentials; empty falls back to Message with addresses hidden.
	Summary string
	// Stalled: nothing arrived for the idle timeout on the last attempt.
	Stalled bool
}

var _ core.PeopleError = (*ModelError)(nil)

// Error implements error.
func (e *ModelError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("model call failed (%s): %s", e.Provider, e.Message)
	}
	return fmt.Sprintf("model call failed (%s): status %d: %s", e.Provider, e.Status, e.Message)
}

// Notice implements core.PeopleError.
func (e *ModelError) Notice() string {
	if e.Summary != "" {
		return e.Summary
	}
	return core.ForPeople(e.Message)
}

// ContextLength reports whether the prompt was too long for the model.
func (e *ModelError) ContextLength() bool {
	if e.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	return e.Status == 400 && (strings.Contains(m, "context length") || strings.Contains(m, "context_length") ||
		strings.Contains(m, "maximum context") || strings.Contains(m, "too many tokens") ||
		strings.Contains(m, "prompt is too long")) // the last: Anthropic's
}

// modelErr turns a ModelAPI error into a ModelError or a timeout/cancellation
// error. ctx is the run's context and cctx the call's; retries is how many times
// the call was retried.
func (r *run) modelErr(ctx, cctx context.Context, err error, retries int) error {
	if ctx.Err() != nil {
		return fmt.Errorf("run stopped during a model call: %w", context.Cause(ctx))
	}
	me := &ModelError{Provider: r.pc.name}
	var (
		apiErr *apiError
		stall  *StallError
		urlErr *url.Error
	)
	hint := "" // for the notice, after the server's message
	attempts := "1 attempt"
	if retries > 0 {
		attempts = fmt.Sprintf("%d attempts", retries+1)
	}
	switch {
	case cctx.Err() != nil:
		me.Message = fmt.Sprintf("no complete answer within %s", r.pc.prov.RequestTimeout)
		me.Summary = fmt.Sprintf("the model did not finish its answer within %s (the request timeout of llm profile %q).",
			r.pc.prov.RequestTimeout, r.pc.name)
	case errors.As(err, &stall):
		me.Stalled = true
		me.Message = fmt.Sprintf("%s (%s)", stall.Error(), attempts)
		me.Summary = fmt.Sprintf("the model stopped responding: nothing arrived from it for %s (%s). Try again later.",
			stall.Idle, attempts)
	case errors.As(err, &apiErr):
		me.Status, me.Code, me.Message, hint = apiErr.Status, apiErr.Code, apiErr.Message, apiErr.Hint
	case errors.As(err, &urlErr):
		me.Message = err.Error()
		me.Summary = fmt.Sprintf("the model service of llm profile %q could not be reached (%s); the log has the details.", r.pc.name, attempts)
	default:
		me.Message = err.Error()
		me.Summary = "the model's answer could not be read; the log has the details."
	}
	if strings.TrimSpace(me.Message) == "" && me.Status != 0 {
		me.Message = http.StatusText(me.Status)
	}
	me.Message = r.redact(me.Message)
	if me.Summary == "" {
		// An HTTP error: the server's own message is the cause.
		me.Summary = fmt.Sprintf("the model service answered HTTP %d", me.Status)
		if me.Status == 0 {
			me.Summary = "the model service answered with an error"
		}
		if msg := core.ForPeople(me.Message); msg != "" {
			me.Summary += ": " + msg
		}
		me.Summary += hint
	}
	return me
}

var (
	htmlTitle = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`) })
	htmlTag   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<[^>]*>`) })
	htmlNoise = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?is)<(script|style|head)[^>]*>.*?</(script|style|head)>`)
	})
)

// maxErrorBody bounds the bytes of an error response's body that bodyText
// reads (the notice keeps 300 characters of it).
const maxErrorBody = 64 << 10

// bodyText is an error response's body as one line: markup (a body that starts
// with a tag: a proxy's or a web server's error page) gives its title, else its
// text without tags, and every run of whitespace becomes one space.
// It reads at most maxErrorBody bytes; redact bounds the length further.
func bodyText(b []byte) string {
	s := strings.TrimSpace(string(b[:min(len(b), maxErrorBody)]))
	if strings.HasPrefix(s, "<") {
		if m := htmlTitle().FindStringSubmatch(s); m != nil && strings.TrimSpace(m[1]) != "" {
			s = m[1]
		} else {
			s = htmlTag().ReplaceAllString(htmlNoise().ReplaceAllString(s, " "), " ")
		}
		s = html.UnescapeString(s)
	}
	return strings.Join(strings.Fields(s), " ")
}

// redact removes the API key and URL credentials from text and bounds its length.
func (r *run) redact(s string) string {
	for _, k := range append([]APIKey{{Value: r.pc.prov.APIKey}}, r.pc.prov.Keys...) {
		if len(k.Value) >= 4 {
			s = strings.ReplaceAll(s, k.Value, core.Redacted)
		}
	}
	s = core.Redact(s)
	if len(s) > 300 {
		s = cutString(s, 300) + "..."
	}
	return s
}

// since is a small helper for step durations.
func (r *run) since(t time.Time) time.Duration { return r.agent.opts.Clock.Now().Sub(t) }
