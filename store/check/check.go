// Package check is the validation both stores (store/bolt and store/postgres)
// run on a record before they write it, so that the two accept exactly the same
// records and a dump moves between them (openbot store migrate). Each function
// returns nil or an error wrapping ErrInvalid (or the error of the read
// function a check of a stored record is given); none does I/O of its own.
// Checks that need a query of their own (a question token that must be free)
// stay with each store.
package check

import (
	"errors"
	"fmt"
	"strings"

	"openbot/core"
)

// ErrInvalid marks a record a store rejected before anything was written; the
// Put and Append methods of both stores' transactions return it wrapped.
var ErrInvalid = errors.New("invalid record")

// Invalid returns an error wrapping ErrInvalid with the formatted reason.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// text reports whether s can be a key or an indexed value: PostgreSQL text
// cannot hold a NUL byte, and bbolt keys built from s must not contain the
// separator.
func text(s string) bool { return strings.IndexByte(s, 0) < 0 }

// filled reports whether s is a non-empty text.
func filled(s string) bool { return s != "" && text(s) }

// Actor: the system actor (empty ID) cannot be stored.
func Actor(a core.Actor) error {
	if a.ID == core.SystemActor || !text(string(a.ID)) {
		return Invalid("actor id %q", a.ID)
	}
	return nil
}

// Bot needs a handle.
func Bot(b core.BotProfile) error {
	if !filled(b.Handle) {
		return Invalid("bot handle %q", b.Handle)
	}
	return nil
}

// ThreadKey is the key BindThreadKey binds.
func ThreadKey(key string) error {
	if !filled(key) {
		return Invalid("thread key %q", key)
	}
	return nil
}

// Message needs a thread.
func Message(m core.Message) error {
	if m.Thread == 0 {
		return Invalid("message without thread")
	}
	return nil
}

// Item needs an actor, a thread, a kind and a status (seed invariant 1: every
// item belongs to a thread).
func Item(it core.InboxItem) error {
	switch {
	case !filled(string(it.Actor)):
		return Invalid("item actor %q", it.Actor)
	case it.Thread == 0:
		return Invalid("item without thread")
	case it.Kind == "":
		return Invalid("item without kind")
	case !filled(string(it.Status)):
		return Invalid("item status %q", it.Status)
	}
	return nil
}

// Run needs a bot, a thread and a status.
func Run(r core.Run) error {
	switch {
	case r.Bot == "":
		return Invalid("run without bot")
	case r.Thread == 0:
		return Invalid("run without thread")
	case !filled(string(r.Status)):
		return Invalid("run status %q", r.Status)
	}
	return nil
}

// Outbox needs a status.
func Outbox(o core.OutboxEntry) error {
	if o.Status == "" {
		return Invalid("outbox entry without status")
	}
	return nil
}

// SeenKey is the dedup key MarkSeen stores.
func SeenKey(key string) error {
	if !filled(key) {
		return Invalid("dedup key %q", key)
	}
	return nil
}

// TodoBot is the bot a todo list belongs to.
func TodoBot(bot core.ActorID) error {
	if !filled(string(bot)) {
		return Invalid("todo bot %q", bot)
	}
	return nil
}

// Cursor needs a name; an empty value deletes it.
func Cursor(name, value string) error {
	if !filled(name) || !text(value) {
		return Invalid("cursor %q", name)
	}
	return nil
}

// Question needs a status, a token of 1 to 16 bytes, a run, a thread and a bot.
func Question(q core.Question) error {
	switch {
	case q.Status == "":
		return Invalid("question without status")
	case !filled(q.Token) || len(q.Token) > 16:
		return Invalid("question token %q (1 to 16 characters)", q.Token)
	case q.Run == 0 || q.Thread == 0 || q.Bot == "":
		return Invalid("question without run, thread or bot")
	}
	return nil
}

// Usage needs a key, and each of its scopes must be text.
func Usage(e core.UsageEntry) error {
	if !filled(e.Key) {
		return Invalid("usage entry key %q", e.Key)
	}
	for _, scope := range e.Scopes() {
		if !text(scope) {
			return Invalid("usage scope %q", scope)
		}
	}
	return nil
}

// Memory needs a bot and text.
func Memory(m core.Memory) error {
	if !filled(m.Bot) || !filled(m.Text) {
		return Invalid("memory without bot or text")
	}
	return nil
}

// MemoryUpdate checks a change of the stored memory m.ID, read with load, to
// m: it must exist and stay its bot's.
func MemoryUpdate(m core.Memory, load func(core.MemoryID) (core.Memory, error)) error {
	old, err := load(m.ID)
	if err == nil && old.Bot != m.Bot {
		err = Invalid("memory %d belongs to @%s, not @%s", m.ID, old.Bot, m.Bot)
	}
	return err
}

// QuestionUpdate checks a change of the stored question q.ID, read with load,
// to q: it must exist and keep its token.
func QuestionUpdate(q core.Question, load func(core.QuestionID) (core.Question, error)) error {
	old, err := load(q.ID)
	if err == nil && old.Token != q.Token {
		err = Invalid("question %d: token cannot change", q.ID)
	}
	return err
}

// PendingReflection needs a bot and a thread.
func PendingReflection(p core.PendingReflection) error {
	if p.Bot == "" || p.Thread == 0 {
		return Invalid("pending reflection without bot or thread")
	}
	return nil
}

// MessageVector needs a thread, a message, a model and a vector.
func MessageVector(v core.MessageVector) error {
	if v.Thread == 0 || v.Message == 0 || !filled(v.Model) || len(v.Vector) == 0 {
		return Invalid("message vector without thread, message, model or vector")
	}
	return nil
}

// Lease needs a key and an owner.
func Lease(l core.Lease) error {
	if !filled(l.Key) || !filled(l.Owner) {
		return Invalid("lease needs a key and an owner")
	}
	return nil
}
