package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// ErrTokenLimit is returned by Execute when a run used its tokens
// (BotProfile.MaxTokensPerRun, else Limits.MaxTokensPerRun) without finishing.
var ErrTokenLimit = errors.New("token limit of the run reached")

// tokenLimitError is ErrTokenLimit with the figures, told to the thread.
type tokenLimitError struct{ used, limit int }

func (e *tokenLimitError) Error() string {
	return fmt.Sprintf("%v: %d of %d tokens", ErrTokenLimit, e.used, e.limit)
}
func (e *tokenLimitError) Unwrap() error { return ErrTokenLimit }

// Notice implements core.PeopleError.
func (e *tokenLimitError) Notice() string {
	return fmt.Sprintf("the run used %d tokens, its limit is %d (max_tokens_per_run).", e.used, e.limit)
}

// maxTokensPerRun is the bot's cap on tokens per run (0: none).
func (a *Agent) maxTokensPerRun(bot core.BotProfile) int {
	if bot.MaxTokensPerRun > 0 {
		return bot.MaxTokensPerRun
	}
	return a.opts.Limits.MaxTokensPerRun
}

// outputEstimate is the output tokens a model call is expected to use when
// the bot sets no max_tokens, for its budget reservation.
const outputEstimate = 1024

// beforeCall checks, before a model call of msgs and defs, the run's token
// cap and, through the run's core.Meter, reserves the call's estimate against
// the budgets its bot and thread count toward (cost control): its prompt at
// four characters a token, and its answer at the bot's max_tokens, else
// outputEstimate, priced as the chain's first model.
func (r *run) beforeCall(ctx context.Context, msgs []openai.ChatCompletionMessage, defs []openai.Tool) error {
	if limit := r.agent.maxTokensPerRun(r.job.Bot); limit > 0 {
		if used := r.usage.PromptTokens + r.usage.CompletionTokens; used >= limit {
			return &tokenLimitError{used: used, limit: limit}
		}
	}
	m, ok := r.job.Env.(core.Meter)
	if !ok {
		return nil
	}
	chars := 0
	for _, msg := range msgs {
		chars += len(msg.Content)
		for _, p := range msg.MultiContent {
			chars += len(p.Text)
		}
		for _, c := range msg.ToolCalls {
			chars += len(c.Function.Arguments)
		}
	}
	for _, d := range defs {
		if d.Function != nil {
			chars += len(d.Function.Description)
			if raw, ok := d.Function.Parameters.(json.RawMessage); ok {
				chars += len(raw)
			}
		}
	}
	return m.BeforeModelCall(ctx, core.ModelCall{Call: r.usage.ModelCalls + 1, Profile: r.links[0].pc.name, Model: r.links[0].model,
		InputTokens: int64(chars/4 + 1), OutputTokens: int64(cmp.Or(r.job.Bot.MaxTokens, outputEstimate))})
}

// recordCall puts the model call just made, number call (r.usage.ModelCalls, counted over
// every segment of the run, so a resumed or replayed call has the same key) in
// the ledger; a failure is logged, not fatal.
func (r *run) recordCall(ctx context.Context, u Usage, call int) {
	m, ok := r.job.Env.(core.Meter)
	if !ok {
		return
	}
	c := r.modelCall(u, call)
	// The call was made and paid for even when the run is being stopped: its
	// entry is stored on a context of its own (bounded), not the run's.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.RecordModelCall(rctx, c); err != nil {
		r.agent.log.Warn("record model call in the usage ledger", "run", r.job.Run.ID, "call", c.Call, "err", err)
	}
}

// modelCall is the ledger's view of the model call number call that used u.
func (r *run) modelCall(u Usage, call int) core.ModelCall {
	return core.ModelCall{Call: call, Profile: r.pc.name, Provider: cmp.Or(r.pc.prov.API, APIOpenAI), Model: r.model,
		Served: r.served, KeyLabel: r.key, Fallback: r.fallback,
		InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens),
		CachedTokens: int64(u.CacheReadTokens), CacheWriteTokens: int64(u.CacheWriteTokens)}
}

// modelParams sets the bot's model parameters on a request: max_tokens,
// temperature and reasoning_effort, each only when configured.
func modelParams(req *ChatRequest, bot core.BotProfile) {
	req.MaxTokens = bot.MaxTokens
	req.Temperature = bot.Temperature
	req.ReasoningEffort = bot.ReasoningEffort
}
