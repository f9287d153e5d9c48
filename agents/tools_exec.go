package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// NoOutput is the tool result shown to the model when a tool returned nothing.
const NoOutput = "(no output)"

// eventResultCap bounds the result text kept in a tool_result run event, in
// bytes; a longer result is cut with a note of its full size.
const eventResultCap = 2000

// execCalls runs tool calls concurrently (at most Options.MaxParallelTools at a
// time), each exactly once, and returns their result texts in call order. It
// records a tool_call event per call before starting and a tool_result event per
// call after all are done; the tool_result event carries the result text the
// model gets ("result", capped at eventResultCap bytes) and its full size
// ("result_bytes"). With h set, h.start runs before each call reaches its tool
// (a call whose start fails is not run) and h.done after it returned.
func (r *run) execCalls(ctx context.Context, calls []openai.ToolCall, h *callHooks) []string {
	byName := make(map[string]Tool, len(r.tools))
	for _, t := range r.tools {
		byName[t.Name()] = t
	}
	type result struct {
		text  string
		isErr bool
		ms    int64
		chars int
	}
	results := make([]result, len(calls))
	sem := make(chan struct{}, r.agent.opts.MaxParallelTools)
	var wg sync.WaitGroup
	for i, c := range calls {
		r.event(ctx, "tool_call", map[string]any{
			"id": c.ID, "name": c.Function.Name, "args": cutString(c.Function.Arguments, 2000),
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				results[i] = result{text: "error: the run was stopped before this tool ran", isErr: true}
				return
			}
			if h != nil && h.start != nil {
				if err := h.start(i); err != nil {
					results[i] = result{text: "error: the tool was not run: " + err.Error(), isErr: true}
					return
				}
			}
			start := r.agent.opts.Clock.Now()
			text, chars, isErr := r.callTool(ctx, byName, c)
			results[i] = result{text: text, isErr: isErr, ms: r.since(start).Milliseconds(), chars: chars}
			r.job.Observer().ToolCall(toolLabel(byName, c.Function.Name), toolOutcome(isErr), r.since(start))
			if h != nil && h.done != nil {
				h.done(i, text)
			}
		}()
	}
	wg.Wait()
	out := make([]string, len(calls))
	for i, c := range calls {
		res := results[i]
		r.event(ctx, "tool_result", map[string]any{
			"id": c.ID, "name": c.Function.Name, "duration_ms": res.ms, "chars": res.chars, "error": res.isErr,
			"result": eventResult(res.text), "result_bytes": len(res.text),
		})
		out[i] = res.text
	}
	return out
}

// callHooks are called around each call of execCalls, from the call's own
// goroutine, with the call's index; they must be safe for concurrent use.
type callHooks struct {
	start func(i int) error
	done  func(i int, text string)
}

// callTool runs one call and renders its result for the model: output wrapped
// untrusted and capped, an error as "error: ..." the model can act on, an empty
// result as NoOutput. It returns the text, the raw output length and whether it
// failed. A panicking tool is reported as an error, not a crash.
func (r *run) callTool(ctx context.Context, byName map[string]Tool, c openai.ToolCall) (text string, chars int, isErr bool) {
	name := c.Function.Name
	t, ok := byName[name]
	if !ok {
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Sprintf("error: there is no tool named %q. Available tools: %s.", name, strings.Join(names, ", ")), 0, true
	}
	args := cmp.Or(strings.TrimSpace(c.Function.Arguments), "{}")
	if !json.Valid([]byte(args)) {
		return fmt.Sprintf("error: the arguments for %s are not valid JSON. Call it again with a JSON object matching its schema.", name), 0, true
	}
	defer func() {
		if p := recover(); p != nil {
			r.agent.log.Error("tool panicked", "tool", name, "run", r.job.Run.ID, "panic", p)
			text, chars, isErr = fmt.Sprintf("error: the tool %s failed unexpectedly (internal error)", name), 0, true
		}
	}()
	out, err := t.Call(ctx, ToolCall{
		Args:   json.RawMessage(args),
		Env:    r.job.Env,
		Bot:    r.job.Bot,
		Thread: r.job.Thread.ID,
		Run:    r.job.Run.ID,
	})
	source := "tool:" + name
	if err != nil {
		msg := "error: " + untrusted(source, r.capResult(err.Error()))
		if strings.TrimSpace(out) != "" {
			msg += "\noutput before the error:\n" + r.wrapCapped(source, out)
		}
		return msg, len(out), true
	}
	if strings.TrimSpace(out) == "" {
		return NoOutput, 0, false
	}
	return r.wrapCapped(source, out), len(out), false
}

// wrapCapped wraps out untrusted after capping it, with the cap note outside the
// wrapper so the model can trust it.
func (r *run) wrapCapped(source, out string) string {
	limit := r.agent.opts.MaxToolResultChars
	if len(out) <= limit {
		return untrusted(source, out)
	}
	return untrusted(source, cutString(out, limit)) +
		fmt.Sprintf("\n[output truncated: showing the first %d of %d characters; ask for a narrower result if you need the rest]", limit, len(out))
}

func (r *run) capResult(s string) string {
	return cutString(s, r.agent.opts.MaxToolResultChars)
}

// eventResult is text as kept in a tool_result event: at most eventResultCap
// bytes, with a note of the full size when cut.
func eventResult(text string) string {
	if len(text) <= eventResultCap {
		return text
	}
	return cutString(text, eventResultCap) + fmt.Sprintf("\n[cut for the event log: the first %d of %d bytes]", eventResultCap, len(text))
}

// toolLabel is a tool's name as a metrics label: a name the run did not offer
// (the model invented it) is "unknown", so labels stay bounded by configuration.
func toolLabel(byName map[string]Tool, name string) string {
	if _, ok := byName[name]; ok {
		return name
	}
	return "unknown"
}

// toolOutcome is a tool call's outcome as a metrics label.
func toolOutcome(isErr bool) string {
	if isErr {
		return "error"
	}
	return "ok"
}
