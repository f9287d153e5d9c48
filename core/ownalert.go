package core

import (
	"context"
	"slices"
	"strings"
)

// ownerHello is the line a DM opened to tell an owner may start with (on a
// platform that must be sent a message to name the DM).
const ownerHello = "openbot: a notice for the owners follows."

// TellOwners sends text to every owner in a DM, for news about openbot itself
// (an account that stays down). The owners are the configured ones
// (Options.Owners) and the stored ones (openbot owner add, pairing); each is
// told once, through the first of their identities (linked ones included, as
// /link stores them) that an account of that identity's platform reaches in a
// DM, as /handoff opens it (DirectOpener). Accounts in avoid (the silent ones)
// are not used. It returns how many owners were told; err is a store error
// only. Each DM is bounded by ctx.
func (e *Engine) TellOwners(ctx context.Context, text string, avoid []AccountID) (told int, err error) {
	var owners [][]ActorID
	err = e.store.View(ctx, func(tx ReadTx) error {
		owners = nil // fn may run again (core.Store.View)
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		add := func(ids []ActorID) {
			if !slices.ContainsFunc(owners, func(o []ActorID) bool { return anyIn(o, ids) }) {
				owners = append(owners, ids)
			}
		}
		for _, id := range e.cfg().owners {
			if human(id) {
				add(d.identities(id))
			}
		}
		for _, p := range d.People {
			if p.Role == RoleOwner {
				add(p.Identities)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, ids := range owners {
		if e.tellOwner(ctx, ids, text, avoid) {
			told++
		}
	}
	return told, nil
}

// tellOwner sends text to the DM of the first of ids an account not in avoid
// reaches, and reports whether one did.
func (e *Engine) tellOwner(ctx context.Context, ids []ActorID, text string, avoid []AccountID) bool {
	for _, id := range ids {
		platform, _, ok := strings.Cut(string(id), ":")
		if !ok {
			continue
		}
		for _, acct := range e.directOpeners(platform) {
			if slices.Contains(avoid, acct) {
				continue
			}
			ad, _ := e.adapter(acct)
			o, ok := ad.(DirectOpener)
			if !ok {
				continue // removed by a reload meanwhile
			}
			ref, _, err := o.DirectConversation(ctx, id, ownerHello)
			if err == nil {
				_, err = ad.Deliver(ctx, Delivery{Conversation: ref, Kind: KindNotice, Text: text})
			}
			if err == nil {
				e.log.Info("owner told in a DM", "account", acct, "actor", id)
				return true
			}
			e.log.Warn("owner not told in a DM", "account", acct, "actor", id, "err", Redact(err.Error()))
		}
	}
	return false
}
