package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limit is one budget: at most Tokens tokens (input plus output) and at most
// CostMicros micro-units of the currency; a zero field sets no limit.
type Limit struct {
	Tokens     int64 `json:"tokens,omitempty"`
	CostMicros int64 `json:"cost_micros,omitempty"`
}

func (l Limit) set() bool { return l.Tokens > 0 || l.CostMicros > 0 }

// BotBudget is a bot's budget per UTC day and per UTC month.
type BotBudget struct {
	Daily   Limit
	Monthly Limit
}

// Cost is the cost control of the engine: prices of the ledger and budgets
// checked when a run starts and before each model call (cost control, spec
// "Cost under control" items 1 to 3). The zero value prices nothing and limits
// nothing.
type Cost struct {
	// Prices by model name (Prices.For); a model not priced costs 0.
	Prices Prices
	// Currency names the unit of prices and budgets in notices ("USD").
	Currency string
	// Bots are budgets by bot handle; the entry "*" applies to bots not listed.
	Bots map[string]BotBudget
	// Thread limits each thread over its whole life.
	Thread Limit
	// GlobalDaily caps all bots together per UTC day.
	GlobalDaily Limit
	// WarnAt is the fraction of a budget at which one notice is posted in the
	// thread that crossed it and logged; 0 means 0.8.
	WarnAt float64
	// Owner says who can raise a budget, named in the notice of a refused run;
	// "" says "an operator (budgets in openbot's config)".
	Owner string
}

func (c *Cost) warnAt() float64 {
	if c.WarnAt <= 0 || c.WarnAt > 1 {
		return 0.8
	}
	return c.WarnAt
}

func (c *Cost) owner() string {
	if c.Owner == "" {
		return "an operator (budgets in openbot's config)"
	}
	return c.Owner
}

func (c *Cost) botBudget(handle string) BotBudget {
	if b, ok := c.Bots[handle]; ok {
		return b
	}
	return c.Bots["*"]
}

// budget is one limit applied to one scope total.
type budget struct {
	name  string // for people: "the daily budget of @eng"
	scope string
	limit Limit
}

// channelBudget is the channel a job's thread started in (its first
// binding's, Channeler) and that channel's daily budget (ChannelPolicy.Budget),
// fixed when the run starts. The zero value is no channel and no budget.
type channelBudget struct {
	acct    AccountID
	channel string
	limit   Limit
}

// budgets are the limits a run of bot in thread, started in channel ch,
// counts toward at now.
func (c *Cost) budgets(bot string, thread ThreadID, ch channelBudget, now time.Time) []budget {
	bb := c.botBudget(bot)
	all := []budget{
		{"the daily budget of @" + bot, BotDayScope(bot, now), bb.Daily},
		{"the monthly budget of @" + bot, BotMonthScope(bot, now), bb.Monthly},
		{"the budget of this thread", ThreadScope(thread), c.Thread},
		{"the daily budget of all bots", GlobalDayScope(now), c.GlobalDaily},
	}
	if ch.channel != "" {
		all = append(all, budget{"the channel budget for today", ChannelDayScope(ch.acct, ch.channel, now), ch.limit})
	}
	out := all[:0]
	for _, b := range all {
		if b.limit.set() {
			out = append(out, b)
		}
	}
	return out
}

// spentShare is how much of b the total t uses, as a fraction (the larger of
// tokens and cost).
func (b budget) spentShare(t UsageTotal) float64 {
	var f float64
	if b.limit.Tokens > 0 {
		f = float64(t.Tokens) / float64(b.limit.Tokens)
	}
	if b.limit.CostMicros > 0 {
		f = max(f, float64(t.CostMicros)/float64(b.limit.CostMicros))
	}
	return f
}

// ErrBudget is matched (errors.Is) by the *BudgetError of a refused or stopped run.
var ErrBudget = errors.New("budget spent")

// BudgetError says which budget a run is refused or stopped by, what was spent
// and who can raise it (cost control). It is a PeopleError: the thread's notice
// is its Notice.
type BudgetError struct {
	Budget string // "the daily budget of @eng"
	Spent  string // "12000 of 10000 tokens" or "5.01 of 5.00 USD"
	Owner  string
}

var _ PeopleError = (*BudgetError)(nil)

// Error implements error.
func (e *BudgetError) Error() string { return "budget spent: " + e.Budget + ": " + e.Spent }

// Is makes errors.Is(err, ErrBudget) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// Notice implements PeopleError.
func (e *BudgetError) Notice() string {
	return fmt.Sprintf("%s is spent (%s). %s can raise it.", e.Budget, e.Spent, e.Owner)
}

// spent renders t against b's limit for people.
func (c *Cost) spent(b budget, t UsageTotal) string {
	var s string
	if b.limit.CostMicros > 0 {
		s = fmt.Sprintf("%s of %s", FormatMicros(t.CostMicros, ""), FormatMicros(b.limit.CostMicros, c.Currency))
	}
	if b.limit.Tokens > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%d of %d tokens", t.Tokens, b.limit.Tokens)
	}
	return s
}

// overBudgetTx returns a *BudgetError for the first budget of bot in thread
// (started in channel ch) that is spent at now, the holds of model calls in
// flight counted, or nil.
func (c *Cost) overBudgetTx(tx ReadTx, bot string, thread ThreadID, ch channelBudget, now time.Time) error {
	for _, b := range c.budgets(bot, thread, ch, now) {
		t, err := tx.UsageTotal(b.scope)
		if err != nil {
			return err
		}
		h, err := readHolds(tx, b.scope, now)
		if err != nil {
			return err
		}
		if err := c.refusal(b, t, h.total()); err != nil {
			return err
		}
	}
	return nil
}

// budgets is the engine's cost-control part: it reads the current Cost
// settings (Reload may change them), checks budgets before runs and model
// calls, writes ledger entries with their warnings, and reports spend. Its
// state is the store's (ledger totals, warning cursors).
type budgets struct {
	e *Engine
}

// costs is the engine's cost settings, or empty ones (no prices, no budgets)
// when none are configured.
func (bg *budgets) costs() *Cost {
	if c := bg.e.cfg().cost; c != nil {
		return c
	}
	return &Cost{}
}

// check returns a *BudgetError when job's bot, thread or channel has spent a
// budget: a new run is refused with it (execute), a run in flight stops at its
// next model call (runEnv.BeforeModelCall).
func (bg *budgets) check(ctx context.Context, job *Job) error {
	c := bg.e.cfg().cost
	if c == nil {
		return nil
	}
	return bg.e.store.View(ctx, func(tx ReadTx) error {
		return c.overBudgetTx(tx, job.Bot.Handle, job.Thread.ID, job.channel, bg.e.clock.Now())
	})
}

// ModelCall is what an agent reports of one model call (Meter.RecordModelCall).
type ModelCall struct {
	// Call is the 1-based sequence of the call in its run, over every segment.
	Call int
	// Profile and Provider are the llm profile that served the call and its
	// API ("openai", "anthropic"); Model is the model asked for and Served the
	// one the server said answered ("" when it did not say). KeyLabel is the label
	// of the API key used ("" for a profile with one unlabelled key or none).
	// Fallback: the profile is not the first of the bot's chain.
	Profile      string
	Provider     string
	Model        string
	Served       string
	KeyLabel     string
	Fallback     bool
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	// CacheWriteTokens are the input tokens written to the provider's prompt
	// cache (Anthropic's cache_creation_input_tokens); InputTokens include them.
	CacheWriteTokens int64
}

// Meter is an optional capability of the RunEnv core provides, for cost
// control: the agent asks BeforeModelCall before each model call and stops the
// run with its error (a *BudgetError, a PeopleError) when a budget is spent, and
// reports each call it made with RecordModelCall. Both honour ctx and are safe
// for concurrent use.
type Meter interface {
	// BeforeModelCall reserves est, the estimate of the run's model call
	// number est.Call (tokens; priced by est.Model), against the budgets the
	// run counts toward, or refuses it with a *BudgetError when the spend plus
	// the reservations of calls in flight reaches a limit. The call's ledger
	// entry (RecordModelCall, StepRecorder) settles the reservation.
	BeforeModelCall(ctx context.Context, est ModelCall) error
	// RecordModelCall stores the call in the ledger, priced, once per (run,
	// call): recording it again changes nothing. The first call that takes a
	// budget past its warning share posts one notice in the thread.
	RecordModelCall(ctx context.Context, c ModelCall) error
}

var _ Meter = (*runEnv)(nil)

// BeforeModelCall implements Meter.
func (r *runEnv) BeforeModelCall(ctx context.Context, est ModelCall) error {
	return r.e.budgets.reserve(ctx, r.job, est)
}

// RecordModelCall implements Meter.
func (r *runEnv) RecordModelCall(ctx context.Context, c ModelCall) error {
	ps, _ := r.prepareStep(Step{Call: &c}) // no event: nothing to fail
	return ps.record(ctx)
}

// usageEntry is the ledger entry of the run's model call c, priced.
func (r *runEnv) usageEntry(c ModelCall) UsageEntry {
	e := r.e
	cost := e.budgets.costs()
	entry := UsageEntry{Key: UsageKey(r.job.Run.ID, c.Call), At: e.clock.Now(), Bot: r.job.Bot.Handle,
		Thread: r.job.Thread.ID, Run: r.job.Run.ID, Channel: r.job.channel.channel, Profile: c.Profile, Provider: c.Provider, Model: c.Model,
		Served: c.Served, KeyLabel: c.KeyLabel, Fallback: c.Fallback,
		InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CachedTokens: c.CachedTokens,
		CacheWriteTokens: c.CacheWriteTokens}
	price, _ := cost.Prices.For(c.Model)
	entry.CostMicros = price.Cost(c.InputTokens, c.OutputTokens, c.CachedTokens, c.CacheWriteTokens)
	if bs := r.job.Thread.Bindings; len(bs) > 0 {
		entry.Platform = bs[0].Platform
		if len(bs[0].Accounts) > 0 {
			entry.Account = bs[0].Accounts[0]
		}
	}
	return entry
}

// budgetWarnings are the notices a ledger entry posted in its transaction
// (budgets.recordTx), announced once it committed.
type budgetWarnings struct {
	texts []string
	p     posted
}

// recordTx puts entry in the ledger inside tx, once per key, and posts a
// notice in the thread for each budget it takes past its warning share for the
// first time in the budget's period; ch is the channel of the entry's run. It
// captures nothing outside its result, so a re-run by Batch decides afresh.
func (bg *budgets) recordTx(tx Tx, entry UsageEntry, ch channelBudget) (budgetWarnings, error) {
	var w budgetWarnings
	cost := bg.costs()
	before := map[string]UsageTotal{}
	bs := cost.budgets(entry.Bot, entry.Thread, ch, entry.At)
	for _, b := range bs {
		t, err := tx.UsageTotal(b.scope)
		if err != nil {
			return w, err
		}
		before[b.scope] = t
	}
	_, added, err := tx.PutUsage(entry)
	if err != nil {
		return w, err
	}
	if err := settleTx(tx, bs, entry); err != nil || !added {
		return w, err
	}
	for _, b := range bs {
		t := before[b.scope].Add(entry)
		if b.spentShare(t) < cost.warnAt() {
			continue
		}
		// One warning per budget and period: the scope names the period.
		mark := "budget.warned:" + b.scope
		if v, err := tx.Cursor(mark); err != nil || v != "" {
			if err != nil {
				return w, err
			}
			continue
		}
		if err := tx.SetCursor(mark, entry.At.UTC().Format(time.RFC3339)); err != nil {
			return w, err
		}
		text := fmt.Sprintf("%s is %d%% used (%s).", capitalize(b.name), int(b.spentShare(t)*100), cost.spent(b, t))
		w.texts = append(w.texts, text)
		th, err := tx.Thread(entry.Thread)
		if err != nil {
			return w, err
		}
		pp, err := bg.e.router.postTx(tx, &th, postSpec{msg: systemNotice(entry.Run, text)})
		if err != nil {
			return w, err
		}
		w.p.woken = append(w.p.woken, pp.woken...)
	}
	return w, nil
}

// announce logs the warnings of a committed ledger entry and delivers their
// notices.
func (w budgetWarnings) announce(e *Engine, entry UsageEntry) {
	for _, t := range w.texts {
		e.log.Warn("budget warning", "bot", entry.Bot, "thread", entry.Thread, "run", entry.Run, "notice", t)
	}
	if len(w.texts) > 0 {
		e.nudge(w.p.woken)
	}
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
