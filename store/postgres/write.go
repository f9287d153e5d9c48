package postgres

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/store/check"
)

// writeTx implements core.Tx. A Put with a non-zero ID first checks that the
// record exists (IDs are store-assigned: a never-assigned ID wraps
// core.ErrNotFound); the partial indexes follow the status columns by
// themselves. Bad input is rejected before any SQL runs, so a rejected call
// leaves the transaction usable, as with bbolt.
type writeTx struct {
	readTx
	locked map[uint64]bool // threads whose lock row this transaction holds (lockThread)
	marked map[string]bool // followed kinds of ID this transaction drew (nextID)
}

var _ core.Tx = (*writeTx)(nil)

func jsonDecode(data []byte, v any, what string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: decode: %w", what, err)
	}
	return nil
}

// exec queues a write whose result is not read (pipe.later): its error, if
// any, comes with a later statement.
func (w *writeTx) exec(what, sql string, args ...any) error {
	w.tx.later(what, sql, args...)
	return nil
}

// upsert stores v's JSON with the key and index columns of sql, which takes the
// JSON as its last argument.
func (w *writeTx) upsert(what, sql string, v any, args ...any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	return w.exec(what, sql, append(args, data)...)
}

// save inserts a new record (fresh) or updates a stored one by its key, the
// first of args; an update that finds no row is core.ErrNotFound wrapped with
// what. Both statements take the JSON as their last argument.
func (w *writeTx) save(what string, fresh bool, insert, update string, v any, args ...any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	if fresh { // an insert of a new ID: nothing to read back
		w.tx.later(what, insert, append(args, data)...)
		return nil
	}
	tag, err := w.tx.Exec(w.ctx, update, append(args, data)...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, core.ErrNotFound)
	}
	return nil
}

// exists returns core.ErrNotFound wrapped with what when sql finds no row.
func (w *writeTx) exists(what, sql string, args ...any) error {
	var one int
	err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, core.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// PutActor upserts by ID; the system actor (empty ID) cannot be stored.
func (w *writeTx) PutActor(a core.Actor) error {
	if err := check.Actor(a); err != nil {
		return err
	}
	return w.upsert("actor", `INSERT INTO actors (id, data) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data`, a, string(a.ID))
}

// PutBot upserts by handle.
func (w *writeTx) PutBot(b core.BotProfile) error {
	if err := check.Bot(b); err != nil {
		return err
	}
	return w.upsert("bot", `INSERT INTO bots (handle, data) VALUES ($1, $2)
		ON CONFLICT (handle) DO UPDATE SET data = EXCLUDED.data`, b, b.Handle)
}

// PutThread stores a thread. It does not bind Thread.Key; BindThreadKey does.
func (w *writeTx) PutThread(t core.Thread) (core.Thread, error) {
	fresh := t.ID == 0
	if fresh {
		id, err := w.nextID("threads")
		if err != nil {
			return t, err
		}
		t.ID = core.ThreadID(id)
	} else if err := w.lockThread(uint64(t.ID)); err != nil {
		return t, err
	}
	return t, w.save(fmt.Sprintf("thread %d", t.ID), fresh, `INSERT INTO threads (id, data) VALUES ($1, $2)`,
		`UPDATE threads SET data = $2 WHERE id = $1`, t, int64(t.ID))
}

// BindThreadKey fails with ErrNotFound when the thread does not exist.
func (w *writeTx) BindThreadKey(key string, id core.ThreadID) error {
	if err := check.ThreadKey(key); err != nil {
		return err
	}
	tag, err := w.tx.Exec(w.ctx, `INSERT INTO thread_keys (key, thread) SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM threads WHERE id = $2)
		ON CONFLICT (key) DO UPDATE SET thread = EXCLUDED.thread`, key, int64(id))
	if err != nil {
		return fmt.Errorf("bind thread key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("thread %d: %w", id, core.ErrNotFound)
	}
	return nil
}

// PutMessage stores a message; Thread must be non-zero.
func (w *writeTx) PutMessage(m core.Message) (core.Message, error) {
	if err := check.Message(m); err != nil {
		return m, err
	}
	if err := w.lockThread(uint64(m.Thread)); err != nil {
		return m, err
	}
	fresh := m.ID == 0
	if fresh {
		id, err := w.nextID("messages")
		if err != nil {
			return m, err
		}
		m.ID = core.MessageID(id)
	}
	return m, w.save(fmt.Sprintf("message %d", m.ID), fresh, `INSERT INTO messages (id, thread, data) VALUES ($1, $2, $3)`,
		`UPDATE messages SET thread = $2, data = $3 WHERE id = $1`, m, int64(m.ID), int64(m.Thread))
}

// PutItem stores an inbox item. Actor, Thread, Kind and Status must be set
// (seed invariant 1: every item belongs to a thread).
func (w *writeTx) PutItem(it core.InboxItem) (core.InboxItem, error) {
	if err := check.Item(it); err != nil {
		return it, err
	}
	if err := w.lockThread(uint64(it.Thread)); err != nil {
		return it, err
	}
	fresh := it.ID == 0
	if fresh {
		id, err := w.nextID("items")
		if err != nil {
			return it, err
		}
		it.ID = core.ItemID(id)
	}
	return it, w.save(fmt.Sprintf("item %d", it.ID), fresh,
		`INSERT INTO items (id, actor, thread, status, data) VALUES ($1, $2, $3, $4, $5)`,
		`UPDATE items SET actor = $2, thread = $3, status = $4, data = $5 WHERE id = $1`,
		it, int64(it.ID), string(it.Actor), int64(it.Thread), string(it.Status))
}

// PutRun stores a run. Bot, Thread and Status must be set. It takes the
// thread's lock row unless it updates a run that is running.
func (w *writeTx) PutRun(r core.Run) (core.Run, error) {
	if err := check.Run(r); err != nil {
		return r, err
	}
	fresh := r.ID == 0
	// A running run's own writes (its step checkpoints, its renewed claim)
	// change only the run, and conflict on its row; creating a run and every
	// change of status are the thread's business.
	if fresh || r.Status != core.RunRunning {
		if err := w.lockThread(uint64(r.Thread)); err != nil {
			return r, err
		}
	}
	if fresh {
		id, err := w.nextID("runs")
		if err != nil {
			return r, err
		}
		r.ID = core.RunID(id)
	}
	return r, w.save(fmt.Sprintf("run %d", r.ID), fresh, `INSERT INTO runs (id, status, data) VALUES ($1, $2, $3)`,
		`UPDATE runs SET status = $2, data = $3 WHERE id = $1`, r, int64(r.ID), string(r.Status))
}

// AppendRunEvent sets Seq to one past the run's last event and Pos (the
// store-wide order) to the next value of ids_run_event_log. The run must
// exist. Two appends to one run at once conflict on (run, seq) and the later
// transaction runs again.
func (w *writeTx) AppendRunEvent(e core.RunEvent) (core.RunEvent, error) {
	var seq int64
	err := w.tx.QueryRow(w.ctx, `SELECT (SELECT coalesce(max(seq), 0) + 1 FROM run_events WHERE run = $1)
		FROM runs WHERE id = $1`, int64(e.Run)).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("run %d: %w", e.Run, core.ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("run %d: next event: %w", e.Run, err)
	}
	e.Seq = uint64(seq)
	pos, err := w.nextID("run_event_log")
	if err != nil {
		return e, err
	}
	return e, w.upsert("run event", `INSERT INTO run_events (run, seq, pos, data) VALUES ($1, $2, $3, $4)`,
		e, int64(e.Run), seq, int64(pos))
}

// PutOutbox stores an outbox entry; it is pending while its Status is. Status
// must be set.
func (w *writeTx) PutOutbox(o core.OutboxEntry) (core.OutboxEntry, error) {
	if err := check.Outbox(o); err != nil {
		return o, err
	}
	if err := w.lockThread(uint64(o.Thread)); err != nil {
		return o, err
	}
	fresh := o.ID == 0
	if fresh {
		id, err := w.nextID("outbox")
		if err != nil {
			return o, err
		}
		o.ID = core.OutboxID(id)
	}
	return o, w.save(fmt.Sprintf("outbox %d", o.ID), fresh, `INSERT INTO outbox (id, pending, data) VALUES ($1, $2, $3)`,
		`UPDATE outbox SET pending = $2, data = $3 WHERE id = $1`, o, int64(o.ID), o.Status == core.OutboxPending)
}

func (w *writeTx) MarkSeen(key string, m core.MessageID) error {
	if err := check.SeenKey(key); err != nil {
		return err
	}
	return w.exec("mark seen", `INSERT INTO seen (key, message) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET message = EXCLUDED.message`, key, int64(m))
}

// PutTodo replaces the list; an empty list deletes it (Todo then returns nil).
func (w *writeTx) PutTodo(bot core.ActorID, thread core.ThreadID, items []core.TodoItem) error {
	if err := check.TodoBot(bot); err != nil {
		return err
	}
	if err := w.lockThread(uint64(thread)); err != nil {
		return err
	}
	if len(items) == 0 {
		return w.exec("delete todo", `DELETE FROM todos WHERE bot = $1 AND thread = $2`, string(bot), int64(thread))
	}
	return w.upsert("todo", `INSERT INTO todos (bot, thread, data) VALUES ($1, $2, $3)
		ON CONFLICT (bot, thread) DO UPDATE SET data = EXCLUDED.data`, items, string(bot), int64(thread))
}

// AppendActivity assigns the next Seq.
func (w *writeTx) AppendActivity(a core.Activity) error {
	seq, err := w.nextID("activity")
	if err != nil {
		return err
	}
	a.Seq = seq
	return w.upsert("activity", `INSERT INTO activity (seq, data) VALUES ($1, $2)`, a, int64(seq))
}

// SetCursor stores value under name; an empty value deletes it.
func (w *writeTx) SetCursor(name, value string) error {
	if err := check.Cursor(name, value); err != nil {
		return err
	}
	if value == "" {
		return w.exec("delete cursor", `DELETE FROM cursors WHERE name = $1`, name)
	}
	return w.exec("set cursor", `INSERT INTO cursors (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, name, value)
}

// PutQuestion stores q. A new question needs a Token no other question has; a
// stored question's Token cannot change.
func (w *writeTx) PutQuestion(q core.Question) (core.Question, error) {
	if err := check.Question(q); err != nil {
		return q, err
	}
	if err := w.lockThread(uint64(q.Thread)); err != nil {
		return q, err
	}
	if q.ID == 0 {
		err := w.exists("token", `SELECT 1 FROM questions WHERE token = $1`, q.Token)
		if err == nil {
			return q, check.Invalid("question token %q is taken", q.Token)
		} else if !errors.Is(err, core.ErrNotFound) {
			return q, err
		}
		id, err := w.nextID("questions")
		if err != nil {
			return q, err
		}
		q.ID = core.QuestionID(id)
	} else if err := check.QuestionUpdate(q, w.Question); err != nil {
		return q, err
	}
	return q, w.upsert("question", `INSERT INTO questions (id, token, pending, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET pending = EXCLUDED.pending, data = EXCLUDED.data`,
		q, int64(q.ID), q.Token, q.Status == core.QuestionPending)
}

// PutUsage stores the entry once per Key and adds it to the totals of its
// Scopes in the same transaction.
func (w *writeTx) PutUsage(e core.UsageEntry) (core.UsageEntry, bool, error) {
	if err := check.Usage(e); err != nil {
		return e, false, err
	}
	err := w.exists("usage key", `SELECT 1 FROM usage WHERE key = $1`, e.Key)
	if err == nil {
		return e, false, nil
	} else if !errors.Is(err, core.ErrNotFound) {
		return e, false, err
	}
	seq, err := w.nextID("usage")
	if err != nil {
		return e, false, err
	}
	e.Seq = seq
	if err := w.upsert("usage entry", `INSERT INTO usage (seq, key, data) VALUES ($1, $2, $3)`, e, int64(seq), e.Key); err != nil {
		return e, false, err
	}
	for _, scope := range e.Scopes() {
		t, err := w.UsageTotal(scope)
		if err != nil {
			return e, false, err
		}
		if err := w.upsert("usage total", `INSERT INTO usage_totals (scope, data) VALUES ($1, $2)
			ON CONFLICT (scope) DO UPDATE SET data = EXCLUDED.data`, t.Add(e), scope); err != nil {
			return e, false, err
		}
	}
	return e, true, nil
}
