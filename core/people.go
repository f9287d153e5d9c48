package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// People (who may talk to the bots and who may approve): a Person is one human
// with one or more platform identities and a role. Owners come from the
// configuration (Options.Owners, the dashboard's operator among them) or are
// stored here (openbot owner add, or the first pairing approved while no owner
// exists); members are the people an owner paired. The registry is one small
// JSON document in the store's cursors (peopleCursor), read and written inside
// the transaction that decides, so it needs no store schema of its own; it is
// meant for a team's people (hundreds), not for a public audience.

// Role is what a stored person may do.
type Role string

// Roles, from most to least power.
const (
	// RoleOwner may change policy, pair people and approve anything, their own
	// requests included.
	RoleOwner Role = "owner"
	// RoleMember may talk to the bots (a paired person).
	RoleMember Role = "member"
)

// Person is one human known to openbot.
type Person struct {
	// ID is "p<n>", stable for the person's lifetime.
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Role Role   `json:"role"`
	// Identities are the person's platform actor ids, first the one they were
	// added with.
	Identities []ActorID `json:"identities"`
	Added      time.Time `json:"added"`
	AddedBy    ActorID   `json:"added_by,omitempty"`
}

// peopleCursor is the store cursor holding the registry (peopleDoc as JSON).
const peopleCursor = "people/v1"

// peopleDoc is the stored registry: people, pending pairing codes and pending
// link codes.
type peopleDoc struct {
	Next    int        `json:"next"`
	People  []Person   `json:"people,omitempty"`
	Pending []Pairing  `json:"pending,omitempty"`
	Links   []linkCode `json:"links,omitempty"`
}

func loadPeopleTx(tx ReadTx) (peopleDoc, error) {
	var d peopleDoc
	v, err := tx.Cursor(peopleCursor)
	if errors.Is(err, ErrNotFound) || (err == nil && v == "") {
		return d, nil
	} else if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return d, fmt.Errorf("people registry: %w", err)
	}
	return d, nil
}

func savePeopleTx(tx Tx, d peopleDoc) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return tx.SetCursor(peopleCursor, string(b))
}

// find returns the index of the person with identity id, or -1.
func (d *peopleDoc) find(id ActorID) int {
	for i, p := range d.People {
		if slices.Contains(p.Identities, id) {
			return i
		}
	}
	return -1
}

// byID returns the index of the person whose ID or identity is ref, or -1.
func (d *peopleDoc) byID(ref string) int {
	for i, p := range d.People {
		if p.ID == ref {
			return i
		}
	}
	return d.find(ActorID(ref))
}

// add stores a new person with one identity and returns it.
func (d *peopleDoc) add(id ActorID, name string, role Role, by ActorID, now time.Time) Person {
	d.Next++
	p := Person{ID: fmt.Sprintf("p%d", d.Next), Name: name, Role: role, Identities: []ActorID{id}, Added: now, AddedBy: by}
	d.People = append(d.People, p)
	return p
}

// hasOwner reports whether any stored person is an owner.
func (d *peopleDoc) hasOwner() bool {
	return slices.ContainsFunc(d.People, func(p Person) bool { return p.Role == RoleOwner })
}

// identities returns every identity of the person behind actor (linked across
// platforms), actor first; just actor when the person is not stored.
func (d *peopleDoc) identities(actor ActorID) []ActorID {
	out := []ActorID{actor}
	if i := d.find(actor); i >= 0 {
		for _, id := range d.People[i].Identities {
			if id != actor {
				out = append(out, id)
			}
		}
	}
	return out
}

// anyIn reports whether one of ids is in list.
func anyIn(ids, list []ActorID) bool {
	return slices.ContainsFunc(ids, func(id ActorID) bool { return slices.Contains(list, id) })
}

// human reports whether actor is a person: neither empty (the system) nor a bot.
func human(actor ActorID) bool {
	return actor != "" && !strings.HasPrefix(string(actor), "bot:")
}

// ownerIn reports whether actor is an owner: configured (settings) or stored,
// through any of their linked identities.
func (e *Engine) ownerIn(d *peopleDoc, actor ActorID) bool {
	if !human(actor) {
		return false
	}
	if anyIn(d.identities(actor), e.cfg().owners) {
		return true
	}
	i := d.find(actor)
	return i >= 0 && d.People[i].Role == RoleOwner
}

// anyOwner reports whether an owner exists, configured or stored.
func (e *Engine) anyOwner(d *peopleDoc) bool {
	return len(e.cfg().owners) > 0 || d.hasOwner()
}
