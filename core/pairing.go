package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Pairing (who may write to the bots in a DM): an account's dm_policy says who
// may. Under DMPairing, the default, a person nobody let in yet gets a one-time
// code and no run; an owner lets them in with /pair CODE in chat, openbot pair
// CODE or the dashboard, and they are stored as a member (core/people.go).

// DM policies: an account's dm_policy.
const (
	// DMPairing: owners, paired people and allow_users may write; anyone else
	// gets a pairing code. The default.
	DMPairing = "pairing"
	// DMAllowlist: owners, paired people and allow_users may write; anyone else
	// is refused, with no code.
	DMAllowlist = "allowlist"
	// DMOpen: anyone may write.
	DMOpen = "open"
	// DMDisabled: nobody may write in a DM; the bots answer in groups only.
	DMDisabled = "disabled"
)

// DMPolicies are the valid dm_policy values, the default first.
var DMPolicies = []string{DMPairing, DMAllowlist, DMOpen, DMDisabled}

// Pairing limits.
const (
	// PairingCodeLen is the length of a pairing code (A-Z, 0-9).
	PairingCodeLen = 8
	// PairingTTL is how long a pairing code stays valid.
	PairingTTL = time.Hour
	// MaxPendingPairings is how many unexpired codes one account holds at
	// most; past it, new people are told to try again later.
	MaxPendingPairings = 3
)

// Pairing is one pending pairing code.
type Pairing struct {
	Code    string    `json:"code"`
	Account AccountID `json:"account"`
	Actor   ActorID   `json:"actor"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Gatekeeper is implemented by the engine: adapters find it by type assertion
// (as Stopper), so an engine without it (a test's fake) still serves them.
type Gatekeeper interface {
	// Admit decides whether a message may reach the bots. It never blocks on a
	// platform: at most one store transaction. Errors are store failures.
	Admit(ctx context.Context, a Admission) (Admitted, error)
}

var _ Gatekeeper = (*Engine)(nil)

// Admission is one person writing in a DM, or in a channel when Conversation
// is set.
type Admission struct {
	Account AccountID
	Actor   ActorID
	Name    string
	// Conversation, set for a message in a group, is where it was posted: the
	// channel policy applies (core/policy.go) instead of the DM policy.
	Conversation ConversationRef
	// Policy is the account's dm_policy ("" is DMPairing).
	Policy string
	// Listed is true when the adapter found the person on the account's
	// allow_users.
	Listed bool
	// Unaddressed, for a message in a group, says the adapter found it
	// addressed to no bot (no native mention or @handle of one; on Telegram no
	// reply to its bot either): it is for the bots only where the channel is
	// open (Admitted.Open), and elsewhere is told nothing.
	Unaddressed bool
}

// Admitted is Admit's decision.
type Admitted struct {
	Allow bool
	// Reply is a short plain text for the person when Allow is false (their
	// pairing code, or why not); "" says nothing.
	Reply string
	// Open, for a message in a group, says the channel's mode is open: a
	// message that addresses no bot is for the bots too, and may start a
	// thread (Inbound.StartThread). An adapter drops an unaddressed message
	// when it is false.
	Open bool
}

// Refusals of people commands; their Error texts are safe to show the person.
var (
	// ErrNotOwner: the command needs an owner.
	ErrNotOwner = errors.New("only an owner can do that")
	// ErrPairingCode: no pending pairing code matches (wrong, expired or used).
	ErrPairingCode = errors.New("that pairing code is not valid: it may be mistyped, expired (codes last 1 hour) or already used")
	// ErrNoPerson: no stored person matches.
	ErrNoPerson = errors.New("no such person")
)

// AdmitDM applies an account's dm_policy to a DM through engine, the engine an
// adapter was given: its Gatekeeper when it has one. Without one (a test's fake
// engine) DMOpen admits everyone, DMDisabled nobody, and the other policies the
// people on allow_users only, since pairing needs the engine's store.
func AdmitDM(ctx context.Context, engine any, a Admission) (Admitted, error) {
	if g, ok := engine.(Gatekeeper); ok {
		return g.Admit(ctx, a)
	}
	policy := a.Policy
	if policy == DMOpen || (policy != DMDisabled && a.Listed) {
		return Admitted{Allow: true}, nil
	}
	return Admitted{Reply: notAllowed(a.Actor)}, nil
}

// Admit implements Gatekeeper.
func (e *Engine) Admit(ctx context.Context, a Admission) (Admitted, error) {
	if a.Conversation != "" {
		return e.admitGroup(ctx, a)
	}
	policy := a.Policy
	if policy == "" {
		policy = DMPairing
	}
	switch {
	case policy == DMOpen:
		return Admitted{Allow: true}, nil
	case policy == DMDisabled:
		return Admitted{Reply: "Sorry, this bot does not take direct messages; mention it in a group instead."}, nil
	case !human(a.Actor):
		return Admitted{}, nil
	}
	var out Admitted
	err := e.store.Update(ctx, func(tx Tx) error {
		out = Admitted{}
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		if a.Listed || e.ownerIn(&d, a.Actor) || d.find(a.Actor) >= 0 {
			out.Allow = true
			return nil
		}
		if policy != DMPairing {
			out.Reply = notAllowed(a.Actor)
			return nil
		}
		now := e.clock.Now()
		changed := d.dropExpired(now)
		i := slices.IndexFunc(d.Pending, func(p Pairing) bool { return p.Account == a.Account && p.Actor == a.Actor })
		switch {
		case i >= 0:
			out.Reply = pairingReply(d.Pending[i].Code)
		case d.pendingFor(a.Account) >= MaxPendingPairings:
			out.Reply = "Sorry, too many people are waiting to be let in right now. Please try again in an hour."
		default:
			code, err := newPairingCode(&d)
			if err != nil {
				return err
			}
			d.Pending = append(d.Pending, Pairing{Code: code, Account: a.Account, Actor: a.Actor, Name: a.Name, Created: now, Expires: now.Add(PairingTTL)})
			changed = true
			out.Reply = pairingReply(code)
			e.activity(tx, Activity{Event: "people.pairing_requested", Summary: fmt.Sprintf("%s (%s) asked to be let in via %s", a.Actor, a.Name, a.Account), Actor: a.Actor})
		}
		if !changed {
			return nil
		}
		return savePeopleTx(tx, d)
	})
	return out, err
}

func notAllowed(actor ActorID) string {
	return fmt.Sprintf("Sorry, you are not allowed to talk to this bot. Your id is %s; an owner can let you in.", actor)
}

func pairingReply(code string) string {
	return "Hi! I do not know you yet. Ask an owner of this bot to let you in with: /pair " + code +
		" (the code expires 1 hour after it was given)."
}

// dropExpired removes pending codes past their expiry and reports whether any were.
func (d *peopleDoc) dropExpired(now time.Time) bool {
	n := len(d.Pending)
	d.Pending = slices.DeleteFunc(d.Pending, func(p Pairing) bool { return !now.Before(p.Expires) })
	return len(d.Pending) != n
}

func (d *peopleDoc) pendingFor(acct AccountID) int {
	n := 0
	for _, p := range d.Pending {
		if p.Account == acct {
			n++
		}
	}
	return n
}

// codeAlphabet is what pairing codes are made of: 36 symbols, so 8 of them
// carry about 41 bits.
const codeAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newPairingCode returns a random code not pending in d.
func newPairingCode(d *peopleDoc) (string, error) {
	for range 8 {
		b := make([]byte, PairingCodeLen)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		for i := range b {
			// 252 = 7*36: bytes at or above it are redrawn, so every symbol is as likely.
			for b[i] >= 252 {
				var one [1]byte
				if _, err := rand.Read(one[:]); err != nil {
					return "", err
				}
				b[i] = one[0]
			}
			b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
		}
		code := string(b)
		if !slices.ContainsFunc(d.Pending, func(p Pairing) bool { return p.Code == code }) {
			return code, nil
		}
	}
	return "", errors.New("could not find an unused pairing code")
}

// PairRequest is an owner letting a person in with their code.
type PairRequest struct {
	Code string
	By   By
}

// Pair lets in the person a pending code was given to, as a member (an owner
// when no owner on a chat platform exists yet: the first pairing). Only an
// owner may (ErrNotOwner); a wrong, expired or used code is ErrPairingCode.
// Either refusal changes nothing. Other errors are store failures.
func (e *Engine) Pair(ctx context.Context, req PairRequest) (Person, error) {
	code := strings.ToUpper(strings.TrimSpace(req.Code))
	var out Person
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		if !e.ownerIn(&d, req.By.Actor) {
			return ErrNotOwner
		}
		now := e.clock.Now()
		i := slices.IndexFunc(d.Pending, func(p Pairing) bool { return p.Code == code && now.Before(p.Expires) })
		if i < 0 || len(code) != PairingCodeLen {
			return ErrPairingCode
		}
		p := d.Pending[i]
		d.Pending = slices.Delete(d.Pending, i, i+1)
		d.dropExpired(now)
		role := RoleMember
		if !d.hasOwner() && !slices.ContainsFunc(e.cfg().owners, chatIdentity) {
			role = RoleOwner
		}
		if j := d.find(p.Actor); j >= 0 {
			out = d.People[j]
		} else {
			out = d.add(p.Actor, p.Name, role, req.By.Actor, now)
		}
		e.activity(tx, Activity{Event: "people.paired", Summary: fmt.Sprintf("%s (%s) let in as %s by %s", p.Actor, p.Name, out.Role, req.By.name()), Actor: req.By.Actor})
		return savePeopleTx(tx, d)
	})
	return out, err
}

// chatIdentity reports whether id is on a chat platform, not the terminal or
// dashboard ("console:").
func chatIdentity(id ActorID) bool { return !strings.HasPrefix(string(id), "console:") }

// AddOwner stores actor as an owner (openbot owner add), or makes the stored
// person behind it one. It needs no owner: whoever can run the command holds
// the store or the admin token. Errors are store failures.
func (e *Engine) AddOwner(ctx context.Context, actor ActorID, name string, by By) (Person, error) {
	if !human(actor) {
		return Person{}, fmt.Errorf("%q is not a person's id", actor)
	}
	var out Person
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		if i := d.find(actor); i >= 0 {
			d.People[i].Role = RoleOwner
			out = d.People[i]
		} else {
			out = d.add(actor, name, RoleOwner, by.Actor, e.clock.Now())
		}
		e.activity(tx, Activity{Event: "people.owner_added", Summary: fmt.Sprintf("%s made an owner by %s", actor, by.name()), Actor: by.Actor})
		return savePeopleTx(tx, d)
	})
	return out, err
}

// People returns the stored people and the pending pairing codes that have not
// expired (the codes themselves included: only owners and the operator may see
// this list).
func (e *Engine) People(ctx context.Context) ([]Person, []Pairing, error) {
	var d peopleDoc
	err := e.store.View(ctx, func(tx ReadTx) error {
		var err error
		d, err = loadPeopleTx(tx)
		return err
	})
	d.dropExpired(e.clock.Now())
	return d.People, d.Pending, err
}

// Revoke removes a stored person (by ID "p3" or by one of their identities):
// they are no longer let in by pairing, and a stored owner is no longer one.
// Owners named in the configuration stay owners. Only an owner may
// (ErrNotOwner); an unknown ref is ErrNoPerson.
func (e *Engine) Revoke(ctx context.Context, ref string, by By) (Person, error) {
	var out Person
	err := e.store.Update(ctx, func(tx Tx) error {
		d, err := loadPeopleTx(tx)
		if err != nil {
			return err
		}
		if !e.ownerIn(&d, by.Actor) {
			return ErrNotOwner
		}
		i := d.byID(strings.TrimSpace(ref))
		if i < 0 {
			return ErrNoPerson
		}
		out = d.People[i]
		d.People = slices.Delete(d.People, i, i+1)
		e.activity(tx, Activity{Event: "people.revoked", Summary: fmt.Sprintf("%s (%s) revoked by %s", out.ID, strings.Join(actorStrings(out.Identities), ", "), by.name()), Actor: by.Actor})
		return savePeopleTx(tx, d)
	})
	return out, err
}

func actorStrings(ids []ActorID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}
