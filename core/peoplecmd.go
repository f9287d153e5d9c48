package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// People commands in chat: "/pair CODE" lets in the person a pairing code was
// given to, "/people" lists the stored people and pending codes, "/revoke ID"
// removes a person. Each is answered without a model call and never stored as
// a message; only owners may use them, and a refusal changes nothing.

// Commander is implemented by the engine; adapters find it by type assertion.
type Commander interface {
	// Command carries out a people command and returns the short plain-text
	// reply for the person who typed it (privately where the platform allows).
	// Refusals are replies, not errors; errors are store failures.
	Command(ctx context.Context, c Command) (string, error)
}

var _ Commander = (*Engine)(nil)

// Command is a people command typed in chat (ParseCommand).
type Command struct {
	Name, Args string
	Actor      ActorID
	ActorName  string
	Account    AccountID
	// Conversation is where it was typed; /policy applies to its channel.
	Conversation ConversationRef
	// Direct is true in a DM: a /link code is given only there.
	Direct bool
	// ThreadKey is the thread key where it was typed (/handoff moves that thread).
	ThreadKey string
}

// commandShapes are the people commands and the arguments each takes, so a
// sentence that happens to start with "pair" is not mistaken for one.
var commandShapes = map[string]*regexp.Regexp{
	"pair":    regexp.MustCompile(`^[A-Za-z0-9]{8}$`),
	"people":  regexp.MustCompile(`^$`),
	"revoke":  regexp.MustCompile(`^\S+$`),
	"policy":  regexp.MustCompile(`^$|^[a-z_]+=`),
	"link":    regexp.MustCompile(`^$|^[A-Za-z0-9]{8}$`),
	"handoff": regexp.MustCompile(`^(?i:slack|telegram|feishu)$`),
}

// ParseCommand finds a people command in a message's normalized text: "/pair
// CODE" or "pair CODE" (any case), after any leading @mentions, with exactly
// the arguments the command takes. ok is false for anything else.
func ParseCommand(text string) (name, args string, ok bool) {
	f := strings.Fields(text)
	for len(f) > 0 && strings.HasPrefix(f[0], "@") {
		f = f[1:]
	}
	if len(f) == 0 {
		return "", "", false
	}
	name = strings.ToLower(strings.TrimPrefix(f[0], "/"))
	if at := strings.IndexByte(name, '@'); at > 0 { // Telegram's /pair@this_bot
		name = name[:at]
	}
	shape, known := commandShapes[name]
	args = strings.Join(f[1:], " ")
	if !known || !shape.MatchString(args) {
		return "", "", false
	}
	return name, args, true
}

// Command implements Commander.
func (e *Engine) Command(ctx context.Context, c Command) (string, error) {
	by := By{Actor: c.Actor, Name: c.ActorName, Via: c.Account}
	switch c.Name {
	case "pair":
		p, err := e.Pair(ctx, PairRequest{Code: c.Args, By: by})
		if err != nil {
			return refusal(err)
		}
		return fmt.Sprintf("Let in %s (%s) as %s.", personName(p), p.Identities[0], p.Role), nil
	case "revoke":
		p, err := e.Revoke(ctx, c.Args, by)
		if err != nil {
			return refusal(err)
		}
		return fmt.Sprintf("Removed %s (%s).", personName(p), strings.Join(actorStrings(p.Identities), ", ")), nil
	case "policy":
		return e.policyCommand(ctx, c, by)
	case "link":
		return e.link(ctx, c)
	case "handoff":
		return e.handoff(ctx, c)
	case "people":
		if ok, err := e.IsOwner(ctx, c.Actor); err != nil {
			return "", err
		} else if !ok {
			return refusal(ErrNotOwner)
		}
		people, pending, err := e.People(ctx)
		if err != nil {
			return "", err
		}
		return PeopleText(people, pending), nil
	}
	return "Unknown command.", nil
}

// refusal turns a people command's refusal into its reply; other errors pass.
func refusal(err error) (string, error) {
	for _, r := range []error{ErrNotOwner, ErrPairingCode, ErrNoPerson} {
		if errors.Is(err, r) {
			return "Sorry, " + r.Error() + ".", nil
		}
	}
	if errors.Is(err, ErrBadPolicy) {
		return "Sorry, " + err.Error() + ". Nothing changed.", nil
	}
	return "", err
}

// policyCommand is /policy: alone it shows the channel's policy, with
// key=value pairs it replaces it (ParsePolicy). Owners only.
func (e *Engine) policyCommand(ctx context.Context, c Command, by By) (string, error) {
	if ok, err := e.IsOwner(ctx, c.Actor); err != nil {
		return "", err
	} else if !ok {
		return refusal(ErrNotOwner)
	}
	channel := e.channelOf(c.Account, c.Conversation)
	if c.Args == "" {
		p, err := e.Policy(ctx, c.Account, channel)
		if err != nil {
			return "", err
		}
		return "Policy here: " + p.Summary() + ". Change it with /policy key=value ... (mode, members, listed, default_bot, tools_removed, tools_added, approvers, budget_tokens, budget_cost, instructions).", nil
	}
	p, err := ParsePolicy(c.Args)
	if err != nil {
		return refusal(err)
	}
	if p, err = e.SetPolicy(ctx, c.Account, channel, p, by); err != nil {
		return refusal(err)
	}
	return "Policy here is now: " + p.Summary() + ".", nil
}

func personName(p Person) string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}

// PeopleText lists people and pending codes in plain text, one per line.
func PeopleText(people []Person, pending []Pairing) string {
	var b strings.Builder
	if len(people) == 0 {
		b.WriteString("No people are stored yet (owners in the config are not listed).\n")
	}
	for _, p := range people {
		fmt.Fprintf(&b, "%s %s (%s): %s\n", p.ID, personName(p), p.Role, strings.Join(actorStrings(p.Identities), ", "))
	}
	for _, p := range pending {
		fmt.Fprintf(&b, "waiting: %s (%s) via %s, code %s until %s\n", p.Actor, p.Name, p.Account, p.Code, p.Expires.UTC().Format("15:04 UTC"))
	}
	return strings.TrimSpace(b.String())
}

// IsOwner reports whether actor is an owner (configured or stored). Errors are
// store failures.
func (e *Engine) IsOwner(ctx context.Context, actor ActorID) (bool, error) {
	var ok bool
	err := e.store.View(ctx, func(tx ReadTx) error {
		d, err := loadPeopleTx(tx)
		ok = e.ownerIn(&d, actor)
		return err
	})
	return ok, err
}
