package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// NotifyTarget is a conversation a bot's notify tool may post into, outside
// the thread it works in: a daily summary into #ops.
type NotifyTarget struct {
	// Name is what the bot calls it ("ops"); [a-z0-9_-]+, unique.
	Name string
	// Account, Platform and Conversation are where the post goes (the
	// account's adapter builds Conversation).
	Account      AccountID
	Platform     string
	Conversation ConversationRef
	// Bots are the handles that may post there; empty: every bot given the tool.
	Bots []string
}

func notifyTargets(ts []NotifyTarget) (map[string]NotifyTarget, error) {
	out := map[string]NotifyTarget{}
	for i, t := range ts {
		switch {
		case !scheduleNameRe.MatchString(t.Name) || out[t.Name].Name != "":
			return nil, fmt.Errorf("notify[%d]: name %q is empty, not [a-z0-9_-]+ or repeated", i, t.Name)
		case t.Account == "" || t.Platform == "" || t.Conversation == "":
			return nil, fmt.Errorf("notify %s: no target conversation", t.Name)
		}
		out[t.Name] = t
	}
	return out, nil
}

// Notifier is an optional capability of the RunEnv core provides, for the
// notify tool.
type Notifier interface {
	// NotifyTargets names the targets this run's bot may post into, sorted.
	NotifyTargets() []string
	// Notify posts text from the run's bot into target's conversation as the
	// first message of a new thread (a platform thread under it where the
	// platform has threads), delivered through that conversation's lane.
	// The same text to the same target again in one run posts nothing more
	// and returns the same thread. ErrUnknownTarget for a target the bot may
	// not use; ErrChannelDisabled when the target channel's policy disables
	// the bots.
	Notify(ctx context.Context, target, text string) (ThreadID, error)
}

// ErrUnknownTarget is returned by Notify for a target that is not configured
// or not open to the bot.
var ErrUnknownTarget = errors.New("no such notify target for this bot")

// ErrChannelDisabled is returned by Notify when the target's channel policy
// has mode disabled: the bots take no part there.
var ErrChannelDisabled = errors.New("the bots are disabled in that channel (channel policy)")

var _ Notifier = (*runEnv)(nil)

func (r *runEnv) NotifyTargets() []string {
	var out []string
	for name, t := range r.e.notify {
		if len(t.Bots) == 0 || slices.Contains(t.Bots, r.job.Bot.Handle) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (r *runEnv) Notify(ctx context.Context, target, text string) (ThreadID, error) {
	t, ok := r.e.notify[target]
	if !ok || !slices.Contains(r.NotifyTargets(), target) {
		return 0, ErrUnknownTarget
	}
	if strings.TrimSpace(text) == "" {
		return 0, errors.New("empty text")
	}
	sum := sha256.Sum256([]byte(target + "\x00" + text))
	key := fmt.Sprintf("notify:%d:%s", r.job.Run.ID, hex.EncodeToString(sum[:12]))
	var p posted
	var id ThreadID
	err := r.e.store.Update(ctx, func(tx Tx) error {
		p = posted{}
		if got, err := tx.ThreadByKey(key); err == nil {
			id = got // posted before (a repeated call)
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		d, err := loadPolicyTx(tx)
		if err != nil {
			return err
		}
		if r.e.policyIn(&d, t.Account, r.e.channelOf(t.Account, t.Conversation)).Mode == ModeDisabled {
			return ErrChannelDisabled
		}
		th := Thread{Key: key, Created: r.e.clock.Now(), DefaultBot: r.job.Bot.ID(), Title: firstLine(text, 80),
			Bindings: []Binding{{Platform: t.Platform, Conversation: t.Conversation, Accounts: []AccountID{t.Account}}}}
		th, err = tx.PutThread(th)
		if err != nil {
			return err
		}
		if err := tx.BindThreadKey(key, th.ID); err != nil {
			return err
		}
		spec := botReply(r.job, text)
		spec.replyTo, spec.streamed, spec.opens = nil, nil, true
		if p, err = r.e.router.postTx(tx, &th, spec); err != nil {
			return err
		}
		id = th.ID
		r.e.activity(tx, Activity{Event: "notify.posted", Summary: fmt.Sprintf("@%s posted into %s", r.job.Bot.Handle, target),
			Thread: th.ID, Actor: r.job.Bot.ID(), Run: r.job.Run.ID, Message: p.msg.ID})
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.e.nudge(p.woken)
	return id, nil
}
