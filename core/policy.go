package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Channel policy: one bot serves channels of different trust (#prod-ops and
// #random). A ChannelPolicy applies to one channel of one account (a Slack
// channel, a Telegram group or forum topic, a Feishu group; the adapter names it,
// Channeler) with the account's default ("*") under it. Policies come from the
// configuration (Settings.Policies) and from owners at run time (/policy in
// chat, the API, the CLI), which are stored (policyCursor), survive restarts and
// are written to the activity log. A stored policy replaces the configured one
// of its channel as a whole.

// Channel modes and member rules.
const (
	ModeMentionOnly = "mention_only" // the default: the bots answer when addressed
	// ModeOpen: every person's message in the channel is for the bots, mentioned
	// or not (the channel's default bot, or a thread's only bot, answers), and
	// the quiet threads rule does not hold there. A message that mentions only
	// people still wakes no bot; bots' messages are never answered.
	ModeOpen     = "open"
	ModeDisabled = "disabled" // the bots take no message in the channel

	MembersEveryone = "everyone" // the default: anyone in the channel
	MembersPaired   = "paired"   // owners and stored people (paired), and Listed
	MembersListed   = "listed"   // owners and Listed only
)

// AccountDefault is the channel name of an account's default policy.
const AccountDefault = "*"

// ChannelPolicy is what applies in one channel. Zero fields take the defaults:
// mention_only, everyone, the account's default bot, the bots' own tools,
// approvers and instructions.
type ChannelPolicy struct {
	Mode    string `json:"mode,omitempty"`
	Members string `json:"members,omitempty"`
	// Listed are the people let in under MembersListed (and MembersPaired).
	Listed []ActorID `json:"listed,omitempty"`
	// DefaultBot answers a new thread here that names no bot.
	DefaultBot string `json:"default_bot,omitempty"`
	// ToolsRemoved are taken from every bot here (names or patterns as in
	// approval_tools); ToolsAdded are given to every bot here.
	ToolsRemoved []string `json:"tools_removed,omitempty"`
	ToolsAdded   []string `json:"tools_added,omitempty"`
	// Approvers approve here instead of the bots' and the global ones (a tool's
	// own approvers still come first).
	Approvers []ActorID `json:"approvers,omitempty"`
	// Instructions are added to every bot's instructions here.
	Instructions string `json:"instructions,omitempty"`
	// Fetch, when set, replaces the bots' http_fetch egress keys here
	// (FetchPolicyFor).
	Fetch *FetchPolicy `json:"fetch,omitempty"`
	// Budget limits the tokens and cost of all runs in threads that started in
	// this channel per UTC day (cost control); zero fields set no limit. Under
	// the account's default it gives each channel its own such budget.
	Budget Limit `json:"budget,omitzero"`
	// SetBy and Set say who stored it and when (stored policies only).
	SetBy ActorID   `json:"set_by,omitempty"`
	Set   time.Time `json:"set,omitempty"`
}

// Channeler is implemented by adapters whose conversations belong to channels:
// ChannelOf returns the channel of a conversation ref (a Slack channel id, a
// Telegram chat or chat and topic, a Feishu chat). Without it a conversation is
// its own channel.
type Channeler interface {
	ChannelOf(ref ConversationRef) string
}

// policyCursor is the store cursor holding the stored policies (policyDoc).
const policyCursor = "policy/v1"

// maxNoticed bounds the remembered "not a member here" notices; past it the
// oldest are forgotten (such a person may get one more).
const maxNoticed = 1000

type policyDoc struct {
	// Channels are keyed by PolicyKey.
	Channels map[string]ChannelPolicy `json:"channels,omitempty"`
	// Noticed are "<key>|<actor>" of people told once they are not members.
	Noticed []string `json:"noticed,omitempty"`
}

// PolicyKey names one channel of one account ("slack/acme T1:C2"); channel
// AccountDefault is the account's default.
func PolicyKey(acct AccountID, channel string) string { return string(acct) + " " + channel }

func loadPolicyTx(tx ReadTx) (policyDoc, error) {
	var d policyDoc
	v, err := tx.Cursor(policyCursor)
	if errors.Is(err, ErrNotFound) || (err == nil && v == "") {
		return d, nil
	} else if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return d, fmt.Errorf("channel policies: %w", err)
	}
	return d, nil
}

func savePolicyTx(tx Tx, d policyDoc) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return tx.SetCursor(policyCursor, string(b))
}

// channelOf is the channel of ref through acct's adapter (Channeler).
func (e *Engine) channelOf(acct AccountID, ref ConversationRef) string {
	if ad, ok := e.adapter(acct); ok {
		if c, ok := ad.(Channeler); ok {
			return c.ChannelOf(ref)
		}
	}
	return string(ref)
}

// policyIn is the policy of channel of acct: stored, else configured, else the
// account's default stored, else configured, else the zero policy.
func (e *Engine) policyIn(d *policyDoc, acct AccountID, channel string) ChannelPolicy {
	conf := e.cfg().policies
	for _, k := range []string{PolicyKey(acct, channel), PolicyKey(acct, AccountDefault)} {
		if p, ok := d.Channels[k]; ok {
			return p
		}
		if p, ok := conf[k]; ok {
			return p
		}
	}
	return ChannelPolicy{}
}

// threadPolicyTx is the policy where thread t started: its first binding's
// channel, through the account it came in by. A thread without bindings (a
// schedule's) has the zero policy.
func (e *Engine) threadPolicyTx(tx ReadTx, t Thread) (ChannelPolicy, error) {
	if len(t.Bindings) == 0 || len(t.Bindings[0].Accounts) == 0 {
		return ChannelPolicy{}, nil
	}
	d, err := loadPolicyTx(tx)
	if err != nil {
		return ChannelPolicy{}, err
	}
	b := t.Bindings[0]
	return e.policyIn(&d, b.Accounts[0], e.channelOf(b.Accounts[0], b.Conversation)), nil
}

// threadPolicyByIDTx is threadPolicyTx for a thread id.
func (e *Engine) threadPolicyByIDTx(tx ReadTx, id ThreadID) (ChannelPolicy, error) {
	t, err := tx.Thread(id)
	if errors.Is(err, ErrNotFound) {
		return ChannelPolicy{}, nil
	} else if err != nil {
		return ChannelPolicy{}, err
	}
	return e.threadPolicyTx(tx, t)
}

// openOriginTx reports whether the channel a person's message came from (o)
// has mode open, where the quiet threads rule does not hold. A message with no
// origin, or a policy that cannot be read, counts as not open.
func (e *Engine) openOriginTx(tx ReadTx, o *Origin) bool {
	if o == nil {
		return false
	}
	d, err := loadPolicyTx(tx)
	return err == nil && e.policyIn(&d, o.Account, e.channelOf(o.Account, o.Conversation)).Mode == ModeOpen
}

// apply returns b as it works under p: tools removed and added, instructions
// extended.
func (p ChannelPolicy) apply(b BotProfile) BotProfile {
	if len(p.ToolsRemoved)+len(p.ToolsAdded) > 0 {
		b.Tools = slices.DeleteFunc(slices.Clone(b.Tools), func(name string) bool {
			return slices.ContainsFunc(p.ToolsRemoved, func(pat string) bool { return ToolMatches(pat, name) })
		})
		for _, t := range p.ToolsAdded {
			if !slices.Contains(b.Tools, t) {
				b.Tools = append(b.Tools, t)
			}
		}
	}
	if p.Instructions != "" {
		b.Instructions = strings.TrimSpace(b.Instructions + "\n\n" + p.Instructions)
	}
	b.Fetch = FetchPolicyFor(b.Fetch, p.Fetch)
	return b
}

// admitGroup decides a message in a channel (Admission.Conversation set):
// disabled channels take nothing, silently; a person who is not a member gets
// one polite notice per channel, then silence. An unaddressed message
// (Admission.Unaddressed) in a channel that is not open gets no notice. It
// reads in one View and writes only to remember a notice, so the chatter an
// adapter sees in a channel costs no commit.
func (e *Engine) admitGroup(ctx context.Context, a Admission) (Admitted, error) {
	channel := e.channelOf(a.Account, a.Conversation)
	mark := PolicyKey(a.Account, channel) + "|" + string(a.Actor)
	var out Admitted
	notice := false
	err := e.store.View(ctx, func(tx ReadTx) error {
		out, notice = Admitted{}, false
		d, err := loadPolicyTx(tx)
		if err != nil {
			return err
		}
		p := e.policyIn(&d, a.Account, channel)
		out.Open = p.Mode == ModeOpen
		switch {
		case p.Mode == ModeDisabled:
			return nil
		case p.Members == "" || p.Members == MembersEveryone:
			out.Allow = true
			return nil
		}
		people, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		ids := people.identities(a.Actor)
		switch {
		case e.ownerIn(&people, a.Actor), anyIn(ids, p.Listed),
			p.Members == MembersPaired && people.find(a.Actor) >= 0:
			out.Allow = true
		case !a.Unaddressed || out.Open:
			notice = !slices.Contains(d.Noticed, mark)
		}
		return nil
	})
	if err != nil || !notice {
		return out, err
	}
	err = e.store.Update(ctx, func(tx Tx) error {
		out.Reply = ""
		d, err := loadPolicyTx(tx)
		if err != nil || slices.Contains(d.Noticed, mark) {
			return err
		}
		d.Noticed = append(d.Noticed, mark)
		if n := len(d.Noticed); n > maxNoticed {
			d.Noticed = slices.Delete(d.Noticed, 0, n-maxNoticed)
		}
		out.Reply = "Sorry, the bots here answer only the people an owner has let in. Ask an owner if you need them."
		return savePolicyTx(tx, d)
	})
	return out, err
}

// AdmitGroup applies the channel policy to a message in a group through engine,
// the engine an adapter was given: its Gatekeeper when it has one, else every
// message is admitted. a.Conversation must be set.
func AdmitGroup(ctx context.Context, engine any, a Admission) (Admitted, error) {
	if g, ok := engine.(Gatekeeper); ok {
		return g.Admit(ctx, a)
	}
	return Admitted{Allow: true}, nil
}

// SetPolicy stores p as the policy of channel of acct (AccountDefault for the
// account's default), replacing any there, and records it in the activity log.
// Only an owner may (ErrNotOwner). Errors otherwise are store failures.
func (e *Engine) SetPolicy(ctx context.Context, acct AccountID, channel string, p ChannelPolicy, by By) (ChannelPolicy, error) {
	if err := p.Check(e.cfg().knownBot); err != nil {
		return ChannelPolicy{}, err
	}
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := e.policiesForOwnerTx(tx, by)
		if err != nil {
			return err
		}
		if d.Channels == nil {
			d.Channels = map[string]ChannelPolicy{}
		}
		p.SetBy, p.Set = by.Actor, e.clock.Now()
		d.Channels[PolicyKey(acct, channel)] = p
		e.activity(tx, Activity{Event: "policy.set", Summary: fmt.Sprintf("channel policy of %s set by %s: %s", PolicyKey(acct, channel), by.name(), p.Summary()), Actor: by.Actor})
		return savePolicyTx(tx, d)
	})
	return p, err
}

// RemovePolicy deletes the stored policy of channel of acct, so the
// configured one (or the account's default) applies again, and records it in
// the activity log. Only an owner may (ErrNotOwner); ErrNoPolicy when none is
// stored there. It returns the policy removed. Errors otherwise are store
// failures.
func (e *Engine) RemovePolicy(ctx context.Context, acct AccountID, channel string, by By) (ChannelPolicy, error) {
	var old ChannelPolicy
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := e.policiesForOwnerTx(tx, by)
		if err != nil {
			return err
		}
		key := PolicyKey(acct, channel)
		p, ok := d.Channels[key]
		if !ok {
			return ErrNoPolicy
		}
		old = p
		delete(d.Channels, key)
		e.activity(tx, Activity{Event: "policy.removed", Summary: fmt.Sprintf("channel policy of %s removed by %s (it was: %s)", key, by.name(), p.Summary()), Actor: by.Actor})
		return savePolicyTx(tx, d)
	})
	return old, err
}

// policiesForOwnerTx reads the stored policies for a change by by, who must
// be an owner (ErrNotOwner).
func (e *Engine) policiesForOwnerTx(tx Tx, by By) (policyDoc, error) {
	people, err := loadPeopleTx(tx)
	if err != nil {
		return policyDoc{}, err
	}
	if !e.ownerIn(&people, by.Actor) {
		return policyDoc{}, ErrNotOwner
	}
	return loadPolicyTx(tx)
}

// Policy returns the policy in effect in channel of acct. Errors are store
// failures.
func (e *Engine) Policy(ctx context.Context, acct AccountID, channel string) (ChannelPolicy, error) {
	var p ChannelPolicy
	err := e.store.View(ctx, func(tx ReadTx) error {
		d, err := loadPolicyTx(tx)
		p = e.policyIn(&d, acct, channel)
		return err
	})
	return p, err
}

// Policies returns the stored policies by PolicyKey.
func (e *Engine) Policies(ctx context.Context) (map[string]ChannelPolicy, error) {
	var d policyDoc
	err := e.store.View(ctx, func(tx ReadTx) error {
		var err error
		d, err = loadPolicyTx(tx)
		return err
	})
	return d.Channels, err
}

// ErrBadPolicy: a policy names an unknown mode, member rule or bot, or sets a
// negative budget.
var ErrBadPolicy = errors.New("bad policy")

// ErrNoPolicy: no policy is stored for the channel (a configured one is not
// stored).
var ErrNoPolicy = errors.New("no policy is stored for that channel")

// Check reports a policy's unknown mode, member rule or bot (knownBot) and a
// negative budget, wrapping ErrBadPolicy with a text a person can act on.
func (p ChannelPolicy) Check(knownBot func(string) bool) error {
	switch {
	case p.Mode != "" && p.Mode != ModeMentionOnly && p.Mode != ModeOpen && p.Mode != ModeDisabled:
		return fmt.Errorf("%w: mode %q is not %s, %s or %s", ErrBadPolicy, p.Mode, ModeMentionOnly, ModeOpen, ModeDisabled)
	case p.Members != "" && p.Members != MembersEveryone && p.Members != MembersPaired && p.Members != MembersListed:
		return fmt.Errorf("%w: members %q is not %s, %s or %s", ErrBadPolicy, p.Members, MembersEveryone, MembersPaired, MembersListed)
	case p.DefaultBot != "" && knownBot != nil && !knownBot(p.DefaultBot):
		return fmt.Errorf("%w: default_bot %q is not a configured bot", ErrBadPolicy, p.DefaultBot)
	case p.Budget.Tokens < 0:
		return fmt.Errorf("%w: budget_tokens must not be negative, got %d", ErrBadPolicy, p.Budget.Tokens)
	case p.Budget.CostMicros < 0:
		return fmt.Errorf("%w: budget_cost must not be negative, got %s", ErrBadPolicy, FormatMicros(p.Budget.CostMicros, ""))
	}
	return nil
}

// Summary is the policy in one line of key=value pairs ("default" when empty).
func (p ChannelPolicy) Summary() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("mode", p.Mode)
	add("members", p.Members)
	add("listed", strings.Join(actorStrings(p.Listed), ","))
	add("default_bot", p.DefaultBot)
	add("tools_removed", strings.Join(p.ToolsRemoved, ","))
	add("tools_added", strings.Join(p.ToolsAdded, ","))
	add("approvers", strings.Join(actorStrings(p.Approvers), ","))
	if p.Budget.Tokens > 0 {
		add("budget_tokens", strconv.FormatInt(p.Budget.Tokens, 10))
	}
	if p.Budget.CostMicros > 0 {
		add("budget_cost", FormatMicros(p.Budget.CostMicros, ""))
	}
	add("instructions", p.Instructions)
	if len(parts) == 0 {
		return "default (mention_only, everyone)"
	}
	return strings.Join(parts, " ")
}

// ParsePolicy reads "key=value ..." as /policy and the CLI take it: mode,
// members, listed, default_bot, tools_removed, tools_added, approvers (lists
// comma-separated), budget_tokens (tokens per UTC day), budget_cost (currency
// units per UTC day, such as 5.50), and instructions, which takes the rest of
// the line.
func ParsePolicy(text string) (ChannelPolicy, error) {
	var p ChannelPolicy
	rest := strings.TrimSpace(text)
	for rest != "" {
		var field string
		field, rest, _ = strings.Cut(rest, " ")
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return p, fmt.Errorf("%w: %q is not key=value", ErrBadPolicy, field)
		}
		list := func() []string {
			var out []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			return out
		}
		ids := func() []ActorID {
			var out []ActorID
			for _, s := range list() {
				out = append(out, ActorID(s))
			}
			return out
		}
		switch k {
		case "mode":
			p.Mode = v
		case "members":
			p.Members = v
		case "listed":
			p.Listed = ids()
		case "default_bot":
			p.DefaultBot = strings.TrimPrefix(v, "@")
		case "tools_removed":
			p.ToolsRemoved = list()
		case "tools_added":
			p.ToolsAdded = list()
		case "approvers":
			p.Approvers = ids()
		case "budget_tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return p, fmt.Errorf("%w: budget_tokens %q is not a whole number of tokens", ErrBadPolicy, v)
			}
			p.Budget.Tokens = n
		case "budget_cost":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || math.IsInf(f, 0) || f > 1e12 {
				return p, fmt.Errorf("%w: budget_cost %q is not an amount such as 5.50", ErrBadPolicy, v)
			}
			p.Budget.CostMicros = int64(math.Round(f * 1e6))
		case "instructions":
			p.Instructions = strings.TrimSpace(v + " " + rest)
			rest = ""
		default:
			return p, fmt.Errorf("%w: unknown key %q (mode, members, listed, default_bot, tools_removed, tools_added, approvers, budget_tokens, budget_cost, instructions)", ErrBadPolicy, k)
		}
		rest = strings.TrimSpace(rest)
	}
	return p, nil
}
