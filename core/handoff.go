package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// /handoff <platform>: a person moves the thread they typed it in to their DM
// with the bots on another platform, where one of their linked identities
// lives (/link). The thread gains a binding to that DM, so every later message
// of the thread is delivered there as well (core mirrors a thread to all its
// bindings), and the person's next DM there continues this thread.

// DirectOpener is implemented by adapters that can reach a person in a DM:
// DirectConversation returns the conversation ref and the thread key of the DM
// between this account and the person with identity actor. A platform that
// names a person's DM only in the answer to a message sent to them (Feishu)
// sends hello there to learn it; the others send nothing. It may call the
// platform (bounded by ctx); an error means the DM cannot be reached.
type DirectOpener interface {
	DirectConversation(ctx context.Context, actor ActorID, hello string) (ref ConversationRef, threadKey string, err error)
}

// handoffHello is the line a DM opened by /handoff may start with.
const handoffHello = "A conversation was handed off to this chat: it goes on here."

// handoff is the /handoff command: c.Args is the platform, c.ThreadKey the
// thread it was typed in.
func (e *Engine) handoff(ctx context.Context, c Command) (string, error) {
	platform := strings.ToLower(c.Args)
	var target ActorID
	var thread ThreadID
	err := e.store.View(ctx, func(tx ReadTx) error {
		target = "" // fn may run again (core.Store.View)
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		for _, id := range d.identities(c.Actor) {
			if strings.HasPrefix(string(id), platform+":") {
				target = id
				break
			}
		}
		if c.ThreadKey != "" {
			thread, err = tx.ThreadByKey(c.ThreadKey)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
		}
		return err
	})
	switch {
	case err != nil:
		return "", err
	case thread == 0:
		return "There is no conversation here to hand off yet.", nil
	case target == "":
		return fmt.Sprintf("You have no %s account linked: send /link in a DM to the bots here, then /link CODE from %s.", platform, platform), nil
	}
	accts := e.directOpeners(platform)
	if len(accts) == 0 {
		return fmt.Sprintf("Sorry, openbot cannot open a DM on %s.", platform), nil
	}
	var acct AccountID
	var ref ConversationRef
	var key string
	for _, id := range accts { // the first account that reaches the person
		ad, _ := e.adapter(id)
		o, ok := ad.(DirectOpener)
		if !ok {
			continue // removed by a reload meanwhile
		}
		if ref, key, err = o.DirectConversation(ctx, target, handoffHello); err == nil {
			acct = id
			break
		}
		e.log.Warn("handoff: no DM", "account", id, "actor", target, "err", err)
	}
	if acct == "" {
		return fmt.Sprintf("Sorry, the bots cannot reach you on %s: start a DM with the bot there first.", platform), nil
	}
	var woken []string
	err = e.store.Update(ctx, func(tx Tx) error {
		t, err := tx.Thread(thread)
		if err != nil {
			return err
		}
		t.Bindings, _ = addBinding(t.Bindings, platform, ref, acct) // stored by postTx below
		if err := tx.BindThreadKey(key, t.ID); err != nil {
			return err
		}
		e.activity(tx, Activity{Event: "thread.handoff", Summary: fmt.Sprintf("%s handed thread %d off to %s %s", c.Actor, t.ID, acct, ref), Thread: t.ID, Actor: c.Actor})
		p, err := e.router.postTx(tx, &t, postSpec{msg: systemNotice(0, fmt.Sprintf("This conversation continues in %s's %s DM.", cmpName(c), platform))})
		woken = p.woken
		return err
	})
	if err != nil {
		return "", err
	}
	e.nudge(woken)
	return fmt.Sprintf("Handed off: this conversation now continues in your %s DM too.", platform), nil
}

func cmpName(c Command) string {
	if c.ActorName != "" {
		return c.ActorName
	}
	return string(c.Actor)
}

// directOpeners are the accounts of platform whose adapters open DMs, by id.
func (e *Engine) directOpeners(platform string) []AccountID {
	e.mu.Lock()
	ids := make([]AccountID, 0, len(e.adapters))
	for id := range e.adapters {
		if strings.HasPrefix(string(id), platform+"/") {
			ids = append(ids, id)
		}
	}
	e.mu.Unlock()
	slices.Sort(ids)
	return slices.DeleteFunc(ids, func(id AccountID) bool {
		ad, ok := e.adapter(id)
		if !ok {
			return true
		}
		_, ok = ad.(DirectOpener)
		return !ok
	})
}
