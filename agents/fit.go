package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// Context editing (seed §6): once this run's tool results pass
// editTriggerTokens (a quarter of the context window when it is known), every
// tool result but those of the newest editKeepSteps steps becomes a one-line
// stub. Editing all of them at once, not one per step, keeps the request's
// leading bytes the same for the steps until the next edit.
const (
	editKeepSteps     = 2
	editTriggerTokens = 15000
	// imageTokens is what one image part is counted as.
	imageTokens = 1600
	// minToolResultChars is as short as fitting cuts the newest tool results.
	minToolResultChars = 500
)

// estimateTokens is a request's size in tokens, estimated at bytes/4 of its
// text and tool schemas, an image counted as imageTokens.
func estimateTokens(msgs []openai.ChatCompletionMessage, defs []openai.Tool) int {
	n := 0
	for _, m := range msgs {
		n += 16 + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, p := range m.MultiContent {
			if p.Type == openai.ChatMessagePartTypeImageURL {
				n += imageTokens * 4
			} else {
				n += len(p.Text)
			}
		}
		for _, c := range m.ToolCalls {
			n += 16 + len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	if len(defs) > 0 {
		raw, _ := json.Marshal(defs)
		n += len(raw)
	}
	return n / 4
}

// inputLimit is how many input tokens a request of the bot may have: the
// profile's context window less room for the answer (the bot's max_tokens,
// else an eighth of the window up to 4096); 0 when the window is unknown.
func inputLimit(pc *providerClient, bot core.BotProfile) int {
	w := pc.contextWindow()
	if w <= 0 {
		return 0
	}
	reserve := min(4096, w/8)
	if bot.MaxTokens > 0 {
		reserve = bot.MaxTokens
	}
	return max(w-reserve, w/4)
}

// historyBudget is the token budget of the thread's history for a request
// whose fixed part (system prompt, tool schemas) is fixed tokens: the
// profile's share of its window less the fixed part (at least 1000), and
// never more than the configured limit (lim.HistoryTokenBudget), which is
// also the budget when the window is unknown. On a large window the share
// alone would let every call carry up to half of it (100k tokens of a 200k
// window) of chat; the limit keeps a long thread's calls as cheap as on a
// small window, and the summary stands for the rest.
func historyBudget(pc *providerClient, lim core.Limits, fixed int) int {
	w := pc.contextWindow()
	if w <= 0 {
		return lim.HistoryTokenBudget
	}
	share := pc.prov.HistoryShare
	if share <= 0 || share > 1 {
		share = DefaultHistoryShare
	}
	return min(max(int(float64(w)*share)-fixed, 1000), lim.HistoryTokenBudget)
}

// fit shrinks the request until its estimate is at most limit tokens
// (r.shrink, least harmful first) and returns it. ok is false when nothing
// more can go and it is still too long.
func (r *run) fit(limit int, defs []openai.Tool) (msgs []openai.ChatCompletionMessage, stable int, ok bool) {
	for {
		msgs, stable = r.messages()
		if limit <= 0 || estimateTokens(msgs, defs) <= limit {
			return msgs, stable, true
		}
		if !r.shrink() {
			return msgs, stable, false
		}
	}
}

// tooLong is the error of a request that does not fit even after shrinking.
func (r *run) tooLong(tokens int) error {
	window := "its context window"
	if w := r.pc.contextWindow(); w > 0 {
		window = fmt.Sprintf("its context window (%d tokens, %s of llm profile %q)", w, windowOrigin(r.pc), r.pc.name)
	}
	msg := fmt.Sprintf("the request does not fit the model's context window even with older history and tool results left out (about %d tokens)", tokens)
	return &ModelError{Provider: r.pc.name, Code: "context_length_exceeded", Message: msg,
		Summary: "this request is too long for the model's " + strings.TrimPrefix(window, "its ") +
			", even with older history and tool results left out. Ask for less at once (smaller files or pages), or use a model with a larger window."}
}

// shrink makes the next request shorter by one step, least harmful first:
// tool results of older steps become stubs; the older half of the history
// goes; the older half of this run's tool exchanges goes (an assistant message
// with tool calls always with its results); the newest tool results are cut
// in half. It reports whether anything changed.
func (r *run) shrink() bool {
	if r.editToolResults(1) {
		return true
	}
	if r.prompt != nil {
		// system, history..., and the last history message is kept.
		if hist := len(r.prompt) - 2; hist >= 2 {
			drop := hist / 2
			// The history never starts with the bot's own reply.
			for drop < hist-1 && r.prompt[1+drop].Role == openai.ChatMessageRoleAssistant {
				drop++
			}
			r.prompt = append(r.prompt[:1:1], r.prompt[1+drop:]...)
			return true
		}
	} else if r.in.view.trim() {
		return true
	}
	var starts []int // where an assistant message starts a unit
	for i, m := range r.transcript {
		if m.Role == openai.ChatMessageRoleAssistant {
			starts = append(starts, i)
		}
	}
	if len(starts) >= 2 {
		r.transcript = r.transcript[starts[len(starts)/2]:]
		return true
	}
	cut := false
	for i, m := range r.transcript {
		if m.Role == openai.ChatMessageRoleTool && len(m.Content) > minToolResultChars {
			keep := max(len(m.Content)/2, minToolResultChars)
			r.transcript[i].Content = cutString(m.Content, keep) +
				fmt.Sprintf("\n[tool result cut to fit the model's context: %d of %d characters shown]", keep, len(m.Content))
			cut = true
		}
	}
	return cut
}

// editToolResults turns every tool result of this run older than the newest
// keep steps into a stub (stubResult); results of ask_human (a person's
// answer) stay. A step is an assistant message with tool calls and its
// results. It reports whether anything changed.
func (r *run) editToolResults(keep int) bool {
	calls := map[string]openai.ToolCall{}
	var steps []int // index of each assistant message with tool calls
	for i, m := range r.transcript {
		if m.Role == openai.ChatMessageRoleAssistant && len(m.ToolCalls) > 0 {
			steps = append(steps, i)
			for _, c := range m.ToolCalls {
				calls[c.ID] = c
			}
		}
	}
	if len(steps) <= keep {
		return false
	}
	end := steps[len(steps)-keep]
	changed := false
	for i := range r.transcript[:end] {
		m := &r.transcript[i]
		if m.Role != openai.ChatMessageRoleTool || strings.HasPrefix(m.Content, stubPrefix) || len(m.Content) < 200 {
			continue
		}
		c := calls[m.ToolCallID]
		if c.Function.Name == AskHumanName {
			continue
		}
		m.Content = stubResult(c, m.Content)
		changed = true
	}
	return changed
}

// editIfLarge applies context editing when this run's tool results pass the
// trigger: a quarter of the context window, else editTriggerTokens.
func (r *run) editIfLarge() {
	trigger := editTriggerTokens
	if w := r.pc.contextWindow(); w > 0 {
		trigger = w / 4
	}
	n := 0
	for _, m := range r.transcript {
		if m.Role == openai.ChatMessageRoleTool {
			n += len(m.Content) / 4
		}
	}
	if n > trigger {
		r.editToolResults(editKeepSteps)
	}
}

const stubPrefix = "[tool result removed to save context: "

// stubResult is the one line that replaces an old tool result: which call
// gave it, how long it was, how it started, and how to get it back.
func stubResult(c openai.ToolCall, content string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(content), "\n")
	again := "call " + c.Function.Name + " again with the same arguments"
	if c.Function.Name == "read_history" || c.Function.Name == "recall_messages" {
		again = "call " + c.Function.Name + " again with the same arguments; the thread keeps every message"
	}
	return fmt.Sprintf("%s%s(%s) returned %d characters starting %q; %s to see it again]",
		stubPrefix, c.Function.Name, cutString(c.Function.Arguments, 200), len(content), cutString(first, 80), again)
}

// minFitChars is as short as chatFitted cuts its text.
const minFitChars = 2000

// chatFitted makes one call of system prompt and one user message, head then
// text, for bot through chain (a.chat: reflection, compaction): text is cut,
// keeping its newest part, to fit the context window of the chain's first
// profile, and each context-length error cuts it in half again, down to
// minFitChars; head is never cut.
func chatFitted(ctx context.Context, a *Agent, chain []link, bot core.BotProfile, system, head, text string) (ChatAnswer, served, error) {
	if limit := inputLimit(chain[0].pc, bot); limit > 0 {
		room := (limit-estimateTokens([]openai.ChatCompletionMessage{{Content: system}, {Content: head}}, nil))*4 - 64
		text = keepNewest(text, max(room, minFitChars))
	}
	for {
		req := ChatRequest{Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: head + text},
		}, StableEnd: 1}
		ans, sv, err := a.chat(ctx, chain, req)
		var ae *apiError
		if err != nil && errors.As(err, &ae) && len(text) > minFitChars &&
			(&ModelError{Status: ae.Status, Code: ae.Code, Message: ae.Message}).ContextLength() {
			text = keepNewest(text, max(len(text)/2, minFitChars))
			continue
		}
		return ans, sv, err
	}
}

// keepNewest cuts s to at most n bytes, keeping its end, and says so.
func keepNewest(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !isRuneStart(s[cut]) {
		cut++
	}
	return "[... earlier part cut]\n" + s[cut:]
}

// FixedPromptTokens estimates, in tokens (bytes/4), the part of every request
// of bot that does not depend on the thread: its system prompt (identity,
// instructions, rules, the roster of the other bots) and the schemas of the
// tools it is offered now (MCP tools of servers that are running included).
// The thread's history, the turn's context and tool results come on top.
func (a *Agent) FixedPromptTokens(bot core.BotProfile, roster []core.BotProfile) int {
	tools, _ := a.tools(bot)
	job := &core.Job{Bot: bot, Roster: roster}
	return estimateTokens([]openai.ChatCompletionMessage{{Content: systemPrompt(promptInput{job: job, tools: tools})}}, toolDefs(tools))
}
