// Package dump is the neutral record stream `openbot store migrate` copies from
// one store implementation to another (DESIGN.md §7): every record kind with its
// store-assigned IDs kept, plus the ID counters, so references between records
// stay valid and new IDs continue where the source stopped. It imports only core.
package dump

import "openbot/core"

// Kinds of records, in the order a source emits them. The names match the
// PostgreSQL tables and the bbolt buckets that hold them.
const (
	Actors      = "actors"
	Bots        = "bots"
	Threads     = "threads"
	ThreadKeys  = "thread_keys"
	Messages    = "messages"
	Items       = "items"
	Runs        = "runs"
	RunEvents   = "run_events"
	Outbox      = "outbox"
	Seen        = "seen"
	Todos       = "todos"
	Activity    = "activity"
	Cursors     = "cursors"
	Questions   = "questions"
	Usage       = "usage"
	UsageTotals = "usage_totals"
	// Memories and PendingReflections are bot memory (seed §9, G7).
	Memories           = "memories"
	PendingReflections = "pending_reflections"
	// MessageVectors is the semantic index of messages (seed §9).
	MessageVectors = "message_vectors"
)

// AllKinds lists every kind, in emission order.
var AllKinds = []string{
	Actors, Bots, Threads, ThreadKeys, Messages, Items, Runs, RunEvents, Outbox,
	Seen, Todos, Activity, Cursors, Questions, Usage, UsageTotals,
	Memories, PendingReflections, MessageVectors,
}

// Record is one record of Kind. Value is the core type of the kind (core.Actor,
// core.BotProfile, core.Thread, core.Message, core.InboxItem, core.Run,
// core.LoggedRunEvent, core.OutboxEntry, core.Activity, core.Question,
// core.UsageEntry, core.Memory, core.PendingReflection, core.MessageVector) or one of this package's pairs (ThreadKey, SeenKey, Todo,
// Cursor, UsageTotal).
type Record struct {
	Kind  string
	Value any
}

// ThreadKey is a platform thread key bound to a thread.
type ThreadKey struct {
	Key    string
	Thread core.ThreadID
}

// SeenKey is a dedup key and the message stored under it.
type SeenKey struct {
	Key     string
	Message core.MessageID
}

// Todo is a bot's todo list in a thread.
type Todo struct {
	Bot    core.ActorID
	Thread core.ThreadID
	Items  []core.TodoItem
}

// Cursor is an adapter's persisted cursor.
type Cursor struct {
	Name, Value string
}

// UsageTotal is the running total of one ledger scope.
type UsageTotal struct {
	Scope string
	Total core.UsageTotal
}

// Counters are the last IDs assigned per sequence (threads, messages, items,
// runs, outbox, activity, questions, run_event_log, usage), so a copy assigns
// the same next IDs as its source would.
type Counters map[string]uint64

// Counts is the number of records per kind.
type Counts map[string]int
