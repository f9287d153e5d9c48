package core

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// UsageEntry is one model call in the usage ledger (cost control; modelled on the
// open-bot seed's usage_entries): every model call of every run, reflection and
// other internal calls included, is one entry. Key makes it idempotent: a call
// that is retried, resumed after a restart or replayed is stored once (Tx.PutUsage).
type UsageEntry struct {
	// Seq is the entry's position in the ledger, assigned by Tx.PutUsage (from 1).
	Seq uint64 `json:"seq"`
	// Key is the idempotency key, UsageKey(run, call).
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Bot    string    `json:"bot"` // handle
	Thread ThreadID  `json:"thread"`
	Run    RunID     `json:"run"`
	// Account and Platform are those the thread's first binding came in through.
	Account  AccountID `json:"account,omitempty"`
	Platform string    `json:"platform,omitempty"`
	// Channel is the channel of that binding (Channeler), whose daily total
	// a channel budget counts ("" in entries written before it was recorded).
	Channel string `json:"channel,omitempty"`
	Profile string `json:"profile,omitempty"` // LLM provider profile
	// Provider is the profile's API ("openai", "anthropic"; "" in entries
	// written before it was recorded).
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model"` // as asked for
	// Served is the model the server said answered, when it said and it
	// differs from Model.
	Served string `json:"served,omitempty"`
	// KeyLabel is the label of the API key that made the call, for a profile
	// with labelled keys.
	KeyLabel string `json:"key_label,omitempty"`
	// Fallback: the call was served by a profile other than the first of the
	// bot's chain.
	Fallback bool `json:"fallback,omitempty"`
	// InputTokens include CachedTokens and CacheWriteTokens (as the OpenAI API
	// counts cached tokens; an Anthropic call's three input counts are summed).
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CachedTokens are input tokens read from the provider's prompt cache.
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// CacheWriteTokens are input tokens written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens), priced at Price.CacheWrite.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CostMicros is the cost in millionths of the currency unit of the prices
	// (Price.Cost); 0 for an unpriced model.
	CostMicros int64 `json:"cost_micros"`
}

// Tokens is input plus output tokens, what token budgets count.
func (e UsageEntry) Tokens() int64 { return e.InputTokens + e.OutputTokens }

// UsageKey is the idempotency key of a run's call-th model call (1-based, counted
// over every segment of the run, so a resumed run continues the sequence).
func UsageKey(run RunID, call int) string { return fmt.Sprintf("run:%d:call:%d", run, call) }

// UsageTotal is the running sum of the ledger entries counted toward one scope.
type UsageTotal struct {
	Tokens     int64 `json:"tokens"`
	CostMicros int64 `json:"cost_micros"`
	Calls      int64 `json:"calls"`
}

// Add returns t with e counted.
func (t UsageTotal) Add(e UsageEntry) UsageTotal {
	return UsageTotal{Tokens: t.Tokens + e.Tokens(), CostMicros: t.CostMicros + e.CostMicros, Calls: t.Calls + 1}
}

// Scopes are the names of the totals an entry counts toward, which the store
// keeps beside the ledger (Tx.PutUsage) so a budget check reads a few keys, not
// the ledger. Days and months are UTC. An entry of no bot (an embedding of
// the message index) counts toward no bot scope, one of no thread toward no
// thread scope, one of no channel toward no channel scope; every entry counts
// toward the global day.
func (e UsageEntry) Scopes() []string {
	var out []string
	if e.Bot != "" {
		out = append(out, BotDayScope(e.Bot, e.At), BotMonthScope(e.Bot, e.At))
	}
	if e.Thread != 0 {
		out = append(out, ThreadScope(e.Thread))
	}
	if e.Account != "" && e.Channel != "" {
		out = append(out, ChannelDayScope(e.Account, e.Channel, e.At))
	}
	return append(out, GlobalDayScope(e.At))
}

// BotDayScope names a bot's total for the UTC day of at.
func BotDayScope(bot string, at time.Time) string {
	return "bot:" + bot + ":day:" + at.UTC().Format(time.DateOnly)
}

// BotMonthScope names a bot's total for the UTC month of at.
func BotMonthScope(bot string, at time.Time) string {
	return "bot:" + bot + ":month:" + at.UTC().Format("2006-01")
}

// ThreadScope names a thread's total over its whole life.
func ThreadScope(t ThreadID) string { return fmt.Sprintf("thread:%d", t) }

// ChannelDayScope names the total of channel of acct (PolicyKey) for the UTC
// day of at.
func ChannelDayScope(acct AccountID, channel string, at time.Time) string {
	return "channel:" + PolicyKey(acct, channel) + ":day:" + at.UTC().Format(time.DateOnly)
}

// GlobalDayScope names the total of every bot for the UTC day of at.
func GlobalDayScope(at time.Time) string { return "all:day:" + at.UTC().Format(time.DateOnly) }

// Price is a model's list price in micro-units of the currency per million
// tokens (cost control: config prices are per million tokens in the account's
// currency unit; 1.25 is 1_250_000 here). Cached is the price of input tokens
// read from a prompt cache and CacheWrite of those written to it; 0 charges
// them at Input.
type Price struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	Cached     int64 `json:"cached_input"`
	CacheWrite int64 `json:"cache_write,omitempty"`
}

// Cost is the price of one call in micro-units of the currency, rounded to the
// nearest micro-unit; input includes cached (read) and cacheWrite tokens.
func (p Price) Cost(input, output, cached, cacheWrite int64) int64 {
	cached = min(max(cached, 0), input)
	cacheWrite = min(max(cacheWrite, 0), input-cached)
	n := (input-cached-cacheWrite)*p.Input + cached*cmp.Or(p.Cached, p.Input) +
		cacheWrite*cmp.Or(p.CacheWrite, p.Input) + output*p.Output
	return (n + 500_000) / 1_000_000
}

// FormatMicros renders micro-units as a decimal amount with the currency, e.g.
// "0.012500 USD" (at most six decimals, trailing zeros kept to two).
func FormatMicros(micros int64, currency string) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := fmt.Sprintf("%s%d.%s", sign, micros/1_000_000, frac)
	if currency != "" {
		s += " " + currency
	}
	return s
}
