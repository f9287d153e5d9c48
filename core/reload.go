package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Settings are the parts of an Engine's configuration that Reload may change while
// it runs: the team, the default bot, the limits and who approves. Zero fields take
// the same defaults as in Options.
type Settings struct {
	Bots       []BotProfile
	DefaultBot string
	Limits     Limits
	Approvers  []ActorID
	// Owners and SelfApprove are as in Options.
	Owners      []ActorID
	SelfApprove bool
	// Policies are the configured channel policies by PolicyKey.
	Policies map[string]ChannelPolicy
	// ApprovalTimeout applies to questions asked after the reload; pending
	// questions keep the deadline they were given.
	ApprovalTimeout time.Duration
	// Cost and AlwaysReply are as in Options; a reload applies them to the
	// next budget check, ledger entry and routed message.
	Cost        *Cost
	AlwaysReply []AccountID
}

// settings is one immutable generation of Settings with defaults applied. The
// Engine holds the current one behind an atomic pointer (Engine.cur): readers load
// it once and use that copy, Reload swaps in a new one.
type settings struct {
	bots            map[string]BotProfile // by handle
	order           []BotProfile
	defaultBot      string
	limits          Limits
	approvers       []ActorID
	owners          []ActorID
	selfApprove     bool
	policies        map[string]ChannelPolicy
	approvalTimeout time.Duration
	cost            *Cost // nil: no prices, no budgets
	alwaysReply     map[AccountID]bool
}

// newSettings validates s and applies its defaults. Every problem is reported.
func newSettings(s Settings) (*settings, error) {
	out := &settings{bots: map[string]BotProfile{}, limits: s.Limits.WithDefaults(),
		approvers: append([]ActorID(nil), s.Approvers...), approvalTimeout: s.ApprovalTimeout,
		owners: append([]ActorID(nil), s.Owners...), selfApprove: s.SelfApprove, policies: s.Policies,
		cost: s.Cost, alwaysReply: map[AccountID]bool{}}
	for _, a := range s.AlwaysReply {
		out.alwaysReply[a] = true
	}
	if out.approvalTimeout <= 0 {
		out.approvalTimeout = DefaultApprovalTimeout
	}
	var errs []error
	if len(s.Bots) == 0 {
		errs = append(errs, errors.New("core: at least one bot is required"))
	}
	for _, b := range s.Bots {
		if b.Handle == "" {
			errs = append(errs, errors.New("core: a bot has an empty handle"))
			continue
		}
		if _, dup := out.bots[b.Handle]; dup {
			errs = append(errs, fmt.Errorf("core: bot handle %q is used twice", b.Handle))
			continue
		}
		out.bots[b.Handle] = b
		out.order = append(out.order, b)
	}
	out.defaultBot = s.DefaultBot
	if out.defaultBot == "" && len(s.Bots) > 0 {
		if _, ok := out.bots["chief_of_staff"]; ok {
			out.defaultBot = "chief_of_staff"
		} else {
			out.defaultBot = s.Bots[0].Handle
		}
	}
	if _, ok := out.bots[out.defaultBot]; !ok && len(s.Bots) > 0 {
		errs = append(errs, fmt.Errorf("core: default bot %q is not configured", out.defaultBot))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// cfg returns the current settings. Callers load it once per decision, so one run's
// pick, routing or settlement sees one consistent generation.
func (e *Engine) cfg() *settings { return e.cur.Load() }

// Reload replaces the engine's settings while it runs (DESIGN.md §10 "Operating
// it"): bots are added, changed or removed, and limits and approvers change,
// without failing runs in flight. A run keeps the BotProfile it was picked with
// (Job.Bot) until it ends; the bot's next run uses the new profile. A new bot gets
// a worker at once; a removed bot's worker takes no more work (its queued items
// stay queued and are picked if the bot comes back); its runs in flight finish.
// A lower max_concurrent_runs lets runs in flight finish and starts new ones only
// below the new cap.
//
// An invalid s is refused with every problem in the error, and nothing changes.
// Reload stores the new bots' actors and profiles before it applies s; an error
// there also changes nothing. Safe for concurrent use; callable before Run.
func (e *Engine) Reload(ctx context.Context, s Settings) error {
	next, err := newSettings(s)
	if err != nil {
		return err
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	e.mu.Lock()
	running := e.running
	e.mu.Unlock()
	if running {
		if err := e.syncBots(ctx, next.order); err != nil {
			return fmt.Errorf("core: storing bots: %w", err)
		}
	}
	e.cur.Store(next)
	e.sched.reloaded(next)
	e.log.Info("engine settings reloaded", "bots", len(next.order), "default_bot", next.defaultBot,
		"max_concurrent_runs", next.limits.MaxConcurrentRuns)
	return nil
}
