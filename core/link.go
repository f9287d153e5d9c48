package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// /link joins one person's identities across platforms: from the account they
// are known by (an owner, or a person let in), "/link" gives a one-time code;
// "/link CODE" sent from their other account (Slack, Telegram, Feishu) adds
// that identity to them. Approver lists, owners and members then name the
// person through any of their identities (peopleDoc.identities).

// LinkTTL is how long a /link code stays valid.
const LinkTTL = 10 * time.Minute

// linkCode is a pending /link code of the person with identity Actor.
type linkCode struct {
	Code    string    `json:"code"`
	Actor   ActorID   `json:"actor"`
	Expires time.Time `json:"expires"`
}

// errLinkCode: no pending /link code matches.
var errLinkCode = errors.New("that link code is not valid: it may be mistyped, expired (codes last 10 minutes) or already used")

// link is the /link command.
func (e *Engine) link(ctx context.Context, c Command) (string, error) {
	if !human(c.Actor) {
		return "", nil
	}
	var reply string
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		now := e.clock.Now()
		d.Links = slices.DeleteFunc(d.Links, func(l linkCode) bool { return !now.Before(l.Expires) || (c.Args == "" && l.Actor == c.Actor) })
		if c.Args == "" {
			if !c.Direct {
				reply = "Send /link in a direct message to the bot, so nobody else sees the code."
				return nil
			}
			if !e.ownerIn(&d, c.Actor) && d.find(c.Actor) < 0 {
				reply = "Sorry, only people who were let in can link their accounts."
				return nil
			}
			code, err := newPairingCode(&d)
			if err != nil {
				return err
			}
			d.Links = append(d.Links, linkCode{Code: code, Actor: c.Actor, Expires: now.Add(LinkTTL)})
			reply = "To join your other account (Slack, Telegram or Feishu) to this one, send /link " + code +
				" to the bots from it within 10 minutes. Keep the code to yourself."
			return savePeopleTx(tx, d)
		}
		code := strings.ToUpper(c.Args)
		i := slices.IndexFunc(d.Links, func(l linkCode) bool { return l.Code == code })
		if i < 0 {
			reply = "Sorry, " + errLinkCode.Error() + "."
			return savePeopleTx(tx, d) // expired codes dropped
		}
		l := d.Links[i]
		d.Links = slices.Delete(d.Links, i, i+1)
		who := d.find(l.Actor)
		if who < 0 {
			role := RoleMember
			if e.ownerIn(&d, l.Actor) {
				role = RoleOwner
			}
			d.add(l.Actor, "", role, l.Actor, now)
			who = len(d.People) - 1
		}
		switch other := d.find(c.Actor); {
		case other == who:
			reply = "This account is already linked."
		case other >= 0:
			reply = fmt.Sprintf("Sorry, this account belongs to another person (%s); an owner can /revoke it first.", d.People[other].ID)
		default:
			d.People[who].Identities = append(d.People[who].Identities, c.Actor)
			reply = "Linked: " + strings.Join(actorStrings(d.People[who].Identities), ", ") + "."
			e.activity(tx, Activity{Event: "people.linked", Summary: fmt.Sprintf("%s linked %s to %s", d.People[who].ID, c.Actor, l.Actor), Actor: c.Actor})
		}
		return savePeopleTx(tx, d)
	})
	return reply, err
}
