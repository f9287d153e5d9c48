package core

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Store lookups for a record that does not exist.
var ErrNotFound = errors.New("not found")

// Store is openbot's durable state (DESIGN.md §7). All multi-record changes go
// through one Update (or Batch) call, which is one transaction: either every write
// in fn lands or none does. Implementations must be safe for concurrent use; at most
// one read-write transaction runs at a time. The conformance suite in core/storetest
// is the contract every implementation passes.
type Store interface {
	// View runs fn in a read-only transaction. Values read are copies that stay
	// valid after fn returns. fn may run more than once (a store whose reads can
	// lose their connection mid-transaction runs fn again in a new one) and only
	// the last run's results count, so it must reset what it captures at its
	// start (assign results, do not append to or count into what lives outside
	// fn) and have no effect outside the transaction.
	View(ctx context.Context, fn func(ReadTx) error) error
	// Update runs fn in one read-write transaction; if fn returns an error nothing
	// is written and that error is returned.
	Update(ctx context.Context, fn func(Tx) error) error
	// Batch is Update for many concurrent callers sharing one commit (group
	// commit, DESIGN.md §7): a lone call commits at once, calls arriving during a
	// commit share the next one; no timer. fn may run more than once (when a
	// neighbour in its group fails, the group rolls back and runs again) and only
	// the last run's writes land, so it must reset what it captures at its start.
	// A failing fn's error goes to its caller only; the others still commit.
	Batch(ctx context.Context, fn func(Tx) error) error
	// Close flushes and closes the store. Calls after Close fail.
	Close() error
}

// ReadTx reads inside a transaction. Lookups of a missing record return ErrNotFound.
type ReadTx interface {
	Actor(id ActorID) (Actor, error)
	Bot(handle string) (BotProfile, error)
	Bots() ([]BotProfile, error)

	Thread(id ThreadID) (Thread, error)
	// ThreadByKey finds the thread currently bound to a platform thread key.
	ThreadByKey(key string) (ThreadID, error)
	// Threads lists threads, newest first, at most limit (0 = all).
	Threads(limit int) ([]Thread, error)

	Message(id MessageID) (Message, error)
	// Messages returns up to limit messages of a thread with IDs > after, oldest first.
	Messages(thread ThreadID, after MessageID, limit int) ([]Message, error)
	// MessagesBefore returns up to limit messages of a thread with IDs < before
	// (0 = from the newest), newest first.
	MessagesBefore(thread ThreadID, before MessageID, limit int) ([]Message, error)
	// CountMessages counts the messages in a thread.
	CountMessages(thread ThreadID) (int, error)

	Item(id ItemID) (InboxItem, error)
	// NextQueued returns the oldest queued item in actor's mailbox for which skip
	// returns false, by a cursor seek over the actor's queue index (no full scan).
	NextQueued(actor ActorID, skip func(InboxItem) bool) (InboxItem, error)
	// QueuedInThread returns actor's queued items in one thread, oldest first.
	QueuedInThread(actor ActorID, thread ThreadID) ([]InboxItem, error)
	// ItemsByStatus returns every item with the status, oldest first. Only
	// ItemQueued and ItemProcessing are indexed; other statuses may scan.
	ItemsByStatus(status ItemStatus) ([]InboxItem, error)
	// CountQueued counts queued items across all mailboxes.
	CountQueued() (int, error)

	Run(id RunID) (Run, error)
	// RunsByStatus returns runs with the status, oldest first. Only non-terminal
	// statuses are indexed.
	RunsByStatus(status RunStatus) ([]Run, error)
	RunEvents(run RunID) ([]RunEvent, error)

	Outbox(id OutboxID) (OutboxEntry, error)
	// PendingOutbox returns up to limit pending entries with IDs > after, oldest first.
	PendingOutbox(after OutboxID, limit int) ([]OutboxEntry, error)

	// Seen returns the message stored under a dedup key, or ErrNotFound.
	Seen(key string) (MessageID, error)
	// Todo returns a bot's todo list for a thread (nil when none was saved).
	Todo(bot ActorID, thread ThreadID) ([]TodoItem, error)
	// Activities returns up to limit activity lines with Seq > after, oldest first.
	Activities(after uint64, limit int) ([]Activity, error)
	// Cursor returns an adapter's persisted cursor (a Telegram offset), "" if unset.
	Cursor(name string) (string, error)

	Question(id QuestionID) (Question, error)
	// QuestionByToken finds a question by its button token.
	QuestionByToken(token string) (Question, error)
	// Questions returns questions oldest first, at most limit (0 = all); with
	// pendingOnly only pending ones, through an index.
	Questions(pendingOnly bool, limit int) ([]Question, error)

	// Reads for the operator console (DESIGN.md §10), paged by the store's own
	// sequence numbers so a caller resumes exactly where it stopped.

	// ThreadsBefore returns up to limit threads with IDs < before (0 = from the
	// newest), newest first.
	ThreadsBefore(before ThreadID, limit int) ([]Thread, error)
	// RunsBefore returns up to limit runs with IDs < before (0 = from the newest),
	// newest first.
	RunsBefore(before RunID, limit int) ([]Run, error)
	// MessagesSince returns up to limit messages of every thread with IDs > after,
	// oldest first (by a cursor over the message ID index, no scan of threads).
	MessagesSince(after MessageID, limit int) ([]Message, error)
	// RunEventsSince returns up to limit run events of every run whose position in
	// the store-wide order of appends is > after, in that order. Events removed
	// since (retention) are skipped.
	RunEventsSince(after uint64, limit int) ([]LoggedRunEvent, error)
	// ActivitiesBefore returns up to limit activity lines with Seq < before (0 =
	// from the newest), newest first.
	ActivitiesBefore(before uint64, limit int) ([]Activity, error)
	// Heads returns the last assigned activity Seq, message ID and run event
	// position (0 when none): where a live event stream that starts "now" begins.
	Heads() (LogHeads, error)

	// UsageTotal returns the running total of a ledger scope (UsageEntry.Scopes);
	// the zero total when nothing was counted toward it.
	UsageTotal(scope string) (UsageTotal, error)
	// UsageEntries returns up to limit ledger entries with Seq > after, oldest first.
	UsageEntries(after uint64, limit int) ([]UsageEntry, error)

	// Memory returns one memory of any bot (seed §9).
	Memory(id MemoryID) (Memory, error)
	// Memories returns every memory of the bot with this handle, oldest first.
	Memories(bot string) ([]Memory, error)
	// PendingReflections returns every pending reflection, oldest first (G7).
	PendingReflections() ([]PendingReflection, error)
	// MessageVectors returns the embeddings stored for a thread's messages,
	// oldest message first (seed §9: the semantic index of messages).
	MessageVectors(thread ThreadID) ([]MessageVector, error)

	// Lease returns the lease stored under key, live or expired (DESIGN.md §7,
	// core/lease.go); ErrNotFound when there is none.
	Lease(key string) (Lease, error)
	// Leases returns every stored lease whose key starts with prefix, by key.
	Leases(prefix string) ([]Lease, error)
}

// LogHeads are the ends of the store's three append-only sequences that the
// console's event stream follows (DESIGN.md §10).
type LogHeads struct {
	Activity uint64    `json:"activity"`
	Message  MessageID `json:"message"`
	RunEvent uint64    `json:"run_event"`
}

// LoggedRunEvent is a run event with its position in the store-wide order in
// which run events were appended (1-based, strictly increasing): the cursor of
// the console's live event stream (DESIGN.md §10).
type LoggedRunEvent struct {
	Pos uint64 `json:"pos"`
	RunEvent
}

// Tx is a read-write transaction. Put methods with a zero ID assign the next ID and
// return the record as stored; with a non-zero ID they replace that record and keep
// every index consistent with its new status.
type Tx interface {
	ReadTx
	PutActor(a Actor) error
	PutBot(b BotProfile) error
	PutThread(t Thread) (Thread, error)
	// BindThreadKey points a platform thread key at a thread, replacing any earlier one.
	BindThreadKey(key string, id ThreadID) error
	PutMessage(m Message) (Message, error)
	PutItem(it InboxItem) (InboxItem, error)
	PutRun(r Run) (Run, error)
	// AppendRunEvent assigns the next Seq for the run and stores the event.
	AppendRunEvent(e RunEvent) (RunEvent, error)
	PutOutbox(o OutboxEntry) (OutboxEntry, error)
	// MarkSeen records a dedup key for a message, replacing any earlier value.
	MarkSeen(key string, m MessageID) error
	PutTodo(bot ActorID, thread ThreadID, items []TodoItem) error
	AppendActivity(a Activity) error
	SetCursor(name, value string) error
	// PutQuestion stores a question; a new one (ID 0) must have a Token not used
	// before. The pending index follows Status.
	PutQuestion(q Question) (Question, error)
	// PutUsage appends a ledger entry (Seq assigned) and adds it to the total of
	// each of its Scopes, unless an entry with the same Key was stored before:
	// then nothing changes and added is false (cost control: idempotent per
	// (run, call)). An empty Key is an error.
	PutUsage(e UsageEntry) (stored UsageEntry, added bool, err error)
	// PutMemory stores a memory (ID 0: a new one, ID assigned) and returns it
	// as stored. Bot and Text must not be empty; a memory cannot move to another
	// bot.
	PutMemory(m Memory) (Memory, error)
	// DeleteMemory removes a memory; ErrNotFound when there is none.
	DeleteMemory(id MemoryID) error
	// PutPendingReflection appends a pending reflection (Seq assigned).
	PutPendingReflection(p PendingReflection) (PendingReflection, error)
	// DeletePendingReflection removes one; removing an absent one is no error.
	DeletePendingReflection(seq uint64) error
	// PutMessageVector stores the embedding of one message, replacing an
	// earlier one (another model). Thread, Message, Model and Vector must be
	// set.
	PutMessageVector(v MessageVector) error
	// PutLease stores a lease under its Key, replacing any earlier one. Key and
	// Owner must not be empty. Callers decide who may take it (TakeLeaseTx).
	PutLease(l Lease) error
	// DeleteLease removes the lease under key; removing an absent one is no error.
	DeleteLease(key string) error
}
