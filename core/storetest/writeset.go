package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"openbot/core"
)

// Writes wraps a store and records the rows its write transactions write,
// named as a store that runs write transactions concurrently under snapshot
// isolation sees them (PostgreSQL at REPEATABLE READ): two such transactions
// that overlap in time conflict, and the later one is rolled back and run
// again on a fresh snapshot, exactly when they write a row in common. So
// Conflict(a, b) on the rows of two operations, each run alone on bbolt, says
// whether they are kept apart when they run at once there.
//
// Row names: "thread:<id>" for a thread, and for every write of one of its
// records (message, item, run, outbox entry, todo list, question: such a
// write first updates the thread's row); "cursor:<name>", "seen:<key>",
// "threadkey:<key>", "lease:<key>", "usage:<key>" and "total:<scope>",
// "question:<id>" and "token:<token>", "run:<id>", "item:<id>",
// "outbox:<id>", "message:<id>", "memory:<id>", "actor:<id>", "bot:<handle>",
// "events:<run>" (run events are numbered per run; but not those of a run the
// same transaction created), "vector:<message>",
// "reflection:<seq>". A record written with a fresh ID is no row another
// transaction writes, and is left out; so are activity lines.
type Writes struct {
	core.Store
	mu   sync.Mutex
	rows map[string]bool
}

// RecordWrites wraps s; Take returns what was written since the last Take.
func RecordWrites(s core.Store) *Writes { return &Writes{Store: s, rows: map[string]bool{}} }

// Take returns the rows written by the write transactions committed since the
// last Take (or since RecordWrites) and starts anew.
func (w *Writes) Take() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.rows
	w.rows = map[string]bool{}
	return out
}

// Conflict returns the rows both a and b write, sorted; none means the two
// would not be kept apart under snapshot isolation.
func Conflict(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (w *Writes) Update(ctx context.Context, fn func(core.Tx) error) error {
	return w.record(func(fn func(core.Tx) error) error { return w.Store.Update(ctx, fn) }, fn)
}

func (w *Writes) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return w.record(func(fn func(core.Tx) error) error { return w.Store.Batch(ctx, fn) }, fn)
}

// record runs fn through write and keeps the rows of its last run once it committed.
func (w *Writes) record(write func(func(core.Tx) error) error, fn func(core.Tx) error) error {
	var last map[string]bool
	err := write(func(tx core.Tx) error {
		last = map[string]bool{}
		return fn(writesTx{tx, last, map[core.RunID]bool{}})
	})
	if err == nil {
		w.mu.Lock()
		for k := range last {
			w.rows[k] = true
		}
		w.mu.Unlock()
	}
	return err
}

type writesTx struct {
	core.Tx
	rows map[string]bool
	// fresh are the runs this transaction created: their events are rows of
	// no other transaction.
	fresh map[core.RunID]bool
}

func (t writesTx) add(format string, args ...any) { t.rows[fmt.Sprintf(format, args...)] = true }

// own adds the row of an existing record and its thread's row.
func (t writesTx) own(kind string, id uint64, thread core.ThreadID) {
	if id != 0 {
		t.add("%s:%d", kind, id)
	}
	t.add("thread:%d", thread)
}

func (t writesTx) PutActor(a core.Actor) error {
	t.add("actor:%s", a.ID)
	return t.Tx.PutActor(a)
}

func (t writesTx) PutBot(b core.BotProfile) error {
	t.add("bot:%s", b.Handle)
	return t.Tx.PutBot(b)
}

func (t writesTx) PutThread(th core.Thread) (core.Thread, error) {
	if th.ID != 0 {
		t.add("thread:%d", th.ID)
	}
	return t.Tx.PutThread(th)
}

func (t writesTx) BindThreadKey(key string, id core.ThreadID) error {
	t.add("threadkey:%s", key)
	return t.Tx.BindThreadKey(key, id)
}

func (t writesTx) PutMessage(m core.Message) (core.Message, error) {
	t.own("message", uint64(m.ID), m.Thread)
	return t.Tx.PutMessage(m)
}

func (t writesTx) PutItem(it core.InboxItem) (core.InboxItem, error) {
	t.own("item", uint64(it.ID), it.Thread)
	return t.Tx.PutItem(it)
}

func (t writesTx) PutRun(r core.Run) (core.Run, error) {
	t.own("run", uint64(r.ID), r.Thread)
	stored, err := t.Tx.PutRun(r)
	if err == nil && r.ID == 0 {
		t.fresh[stored.ID] = true
	}
	return stored, err
}

func (t writesTx) AppendRunEvent(e core.RunEvent) (core.RunEvent, error) {
	if !t.fresh[e.Run] {
		t.add("events:%d", e.Run)
	}
	return t.Tx.AppendRunEvent(e)
}

func (t writesTx) PutOutbox(o core.OutboxEntry) (core.OutboxEntry, error) {
	t.own("outbox", uint64(o.ID), o.Thread)
	return t.Tx.PutOutbox(o)
}

func (t writesTx) MarkSeen(key string, m core.MessageID) error {
	t.add("seen:%s", key)
	return t.Tx.MarkSeen(key, m)
}

func (t writesTx) PutTodo(bot core.ActorID, thread core.ThreadID, items []core.TodoItem) error {
	t.add("todo:%s:%d", bot, thread)
	t.add("thread:%d", thread)
	return t.Tx.PutTodo(bot, thread, items)
}

func (t writesTx) SetCursor(name, value string) error {
	if cur, err := t.Tx.Cursor(name); value != "" || (err == nil && cur != "") {
		t.add("cursor:%s", name) // "" deletes: no row when there was none
	}
	return t.Tx.SetCursor(name, value)
}

func (t writesTx) PutQuestion(q core.Question) (core.Question, error) {
	t.own("question", uint64(q.ID), q.Thread)
	t.add("token:%s", q.Token)
	return t.Tx.PutQuestion(q)
}

func (t writesTx) PutUsage(e core.UsageEntry) (core.UsageEntry, bool, error) {
	t.add("usage:%s", e.Key)
	stored, added, err := t.Tx.PutUsage(e)
	if added {
		for _, s := range e.Scopes() {
			t.add("total:%s", s)
		}
	}
	return stored, added, err
}

func (t writesTx) PutMemory(m core.Memory) (core.Memory, error) {
	if m.ID != 0 {
		t.add("memory:%d", m.ID)
	}
	return t.Tx.PutMemory(m)
}

func (t writesTx) DeleteMemory(id core.MemoryID) error {
	t.add("memory:%d", id)
	return t.Tx.DeleteMemory(id)
}

func (t writesTx) DeletePendingReflection(seq uint64) error {
	t.add("reflection:%d", seq)
	return t.Tx.DeletePendingReflection(seq)
}

func (t writesTx) PutMessageVector(v core.MessageVector) error {
	t.add("vector:%d", v.Message)
	return t.Tx.PutMessageVector(v)
}

func (t writesTx) PutLease(l core.Lease) error {
	t.add("lease:%s", l.Key)
	return t.Tx.PutLease(l)
}

func (t writesTx) DeleteLease(key string) error {
	t.add("lease:%s", key)
	return t.Tx.DeleteLease(key)
}
