package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"openbot/core"
)

// readTx implements core.ReadTx on a pgx transaction. Every value it returns is
// decoded from the row into fresh memory, so it outlives the transaction.
type readTx struct {
	ctx context.Context
	tx  *pipe
}

var _ core.ReadTx = (*readTx)(nil)

// one decodes the json column of the single row sql returns into v, or returns
// core.ErrNotFound wrapped with what.
func (r *readTx) one(v any, what, sql string, args ...any) error {
	var data []byte
	err := r.tx.QueryRow(r.ctx, sql, args...).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, core.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: decode: %w", what, err)
	}
	return nil
}

// list decodes the json column of every row sql returns, in row order.
func list[T any](r *readTx, what, sql string, args ...any) ([]T, error) {
	rows, err := r.tx.Query(r.ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// lim is a LIMIT argument: NULL (no limit) for limit <= 0.
func lim(limit int) *int64 {
	if limit <= 0 {
		return nil
	}
	n := int64(limit)
	return &n
}

// before is an upper ID bound: "from the newest" for 0.
func before(id uint64) int64 {
	if id == 0 {
		return 1<<63 - 1
	}
	return int64(id)
}

func (r *readTx) Actor(id core.ActorID) (core.Actor, error) {
	var a core.Actor
	err := r.one(&a, fmt.Sprintf("actor %q", id), `SELECT data FROM actors WHERE id = $1`, string(id))
	return a, err
}

func (r *readTx) Bot(handle string) (core.BotProfile, error) {
	var b core.BotProfile
	err := r.one(&b, fmt.Sprintf("bot %q", handle), `SELECT data FROM bots WHERE handle = $1`, handle)
	return b, err
}

// Bots returns every bot profile ordered by handle.
func (r *readTx) Bots() ([]core.BotProfile, error) {
	return list[core.BotProfile](r, "bots", `SELECT data FROM bots ORDER BY handle`)
}

func (r *readTx) Thread(id core.ThreadID) (core.Thread, error) {
	var t core.Thread
	err := r.one(&t, fmt.Sprintf("thread %d", id), `SELECT data FROM threads WHERE id = $1`, int64(id))
	return t, err
}

func (r *readTx) ThreadByKey(key string) (core.ThreadID, error) {
	var id int64
	err := r.tx.QueryRow(r.ctx, `SELECT thread FROM thread_keys WHERE key = $1`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("thread key %q: %w", key, core.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("thread key %q: %w", key, err)
	}
	return core.ThreadID(id), nil
}

func (r *readTx) Threads(limit int) ([]core.Thread, error) {
	return r.ThreadsBefore(0, limit)
}

func (r *readTx) Message(id core.MessageID) (core.Message, error) {
	var m core.Message
	err := r.one(&m, fmt.Sprintf("message %d", id), `SELECT data FROM messages WHERE id = $1`, int64(id))
	return m, err
}

func (r *readTx) Messages(thread core.ThreadID, after core.MessageID, limit int) ([]core.Message, error) {
	return list[core.Message](r, fmt.Sprintf("messages of thread %d", thread),
		`SELECT data FROM messages WHERE thread = $1 AND id > $2 ORDER BY id LIMIT $3`,
		int64(thread), int64(after), lim(limit))
}

func (r *readTx) MessagesBefore(thread core.ThreadID, beforeID core.MessageID, limit int) ([]core.Message, error) {
	return list[core.Message](r, fmt.Sprintf("messages of thread %d", thread),
		`SELECT data FROM messages WHERE thread = $1 AND id < $2 ORDER BY id DESC LIMIT $3`,
		int64(thread), before(uint64(beforeID)), lim(limit))
}

func (r *readTx) CountMessages(thread core.ThreadID) (int, error) {
	var n int
	err := r.tx.QueryRow(r.ctx, `SELECT count(*) FROM messages WHERE thread = $1`, int64(thread)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count messages of thread %d: %w", thread, err)
	}
	return n, nil
}

func (r *readTx) Item(id core.ItemID) (core.InboxItem, error) {
	var it core.InboxItem
	err := r.one(&it, fmt.Sprintf("item %d", id), `SELECT data FROM items WHERE id = $1`, int64(id))
	return it, err
}

// NextQueued reads the actor's queue a page at a time: nextQueuedFirst items,
// then nextQueuedPage; skip runs between queries, so it may use the
// transaction itself.
const (
	nextQueuedFirst = 8
	nextQueuedPage  = 64
)

// nextQueuedSQL is one page of an actor's queue: a seek into items_queue
// (actor, id) WHERE status = 'queued' that reads at most $3 rows, whatever the
// length of the queue or of the table's history (DESIGN.md §7: a pick costs the
// same with 100 or 100,000 queued items). It says actor = $1 AND id > $2 as a
// row comparison and an upper bound, and orders by (actor, id): written plainly,
// the planner may walk the primary key or items_open in id order and filter,
// believing the actor's queued rows evenly spread, which reads every older row
// (the history of completed items, other bots' backlogs) before the first match.
const nextQueuedSQL = `SELECT id, data FROM items
	WHERE status = 'queued' AND (actor, id) > ($1, $2) AND actor <= $1
	ORDER BY actor, id LIMIT $3`

// NextQueued walks the actor's queue index a page at a time and returns the
// first item skip does not skip, decoding only the items it offers skip.
func (r *readTx) NextQueued(actor core.ActorID, skip func(core.InboxItem) bool) (core.InboxItem, error) {
	what := fmt.Sprintf("queue of %q", actor)
	var after int64
	for page := nextQueuedFirst; ; page = nextQueuedPage {
		rows, err := r.tx.Query(r.ctx, nextQueuedSQL, string(actor), after, page)
		if err != nil {
			return core.InboxItem{}, fmt.Errorf("%s: %w", what, err)
		}
		var ids []int64
		var datas [][]byte
		for rows.Next() {
			var id int64
			var data []byte
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return core.InboxItem{}, fmt.Errorf("%s: %w", what, err)
			}
			ids, datas = append(ids, id), append(datas, data)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return core.InboxItem{}, fmt.Errorf("%s: %w", what, err)
		}
		for i, data := range datas {
			var it core.InboxItem
			if err := json.Unmarshal(data, &it); err != nil {
				return core.InboxItem{}, fmt.Errorf("%s: item %d: decode: %w", what, ids[i], err)
			}
			if skip == nil || !skip(it) {
				return it, nil
			}
			after = ids[i]
		}
		if len(datas) < page {
			return core.InboxItem{}, fmt.Errorf("next queued item of %q: %w", actor, core.ErrNotFound)
		}
	}
}

func (r *readTx) QueuedInThread(actor core.ActorID, thread core.ThreadID) ([]core.InboxItem, error) {
	return list[core.InboxItem](r, fmt.Sprintf("queue of %q in thread %d", actor, thread),
		`SELECT data FROM items WHERE actor = $1 AND thread = $2 AND status = 'queued' ORDER BY id`,
		string(actor), int64(thread))
}

// ItemsByStatus uses the partial index for queued and processing items and
// scans for any other status.
func (r *readTx) ItemsByStatus(status core.ItemStatus) ([]core.InboxItem, error) {
	return list[core.InboxItem](r, fmt.Sprintf("items %s", status),
		`SELECT data FROM items WHERE status = $1 ORDER BY id`, string(status))
}

func (r *readTx) CountQueued() (int, error) {
	var n int
	if err := r.tx.QueryRow(r.ctx, `SELECT count(*) FROM items WHERE status = 'queued'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued items: %w", err)
	}
	return n, nil
}

func (r *readTx) Run(id core.RunID) (core.Run, error) {
	var run core.Run
	err := r.one(&run, fmt.Sprintf("run %d", id), `SELECT data FROM runs WHERE id = $1`, int64(id))
	return run, err
}

func (r *readTx) RunsByStatus(status core.RunStatus) ([]core.Run, error) {
	return list[core.Run](r, fmt.Sprintf("runs %s", status),
		`SELECT data FROM runs WHERE status = $1 ORDER BY id`, string(status))
}

func (r *readTx) RunEvents(run core.RunID) ([]core.RunEvent, error) {
	return list[core.RunEvent](r, fmt.Sprintf("events of run %d", run),
		`SELECT data FROM run_events WHERE run = $1 ORDER BY seq`, int64(run))
}

func (r *readTx) Outbox(id core.OutboxID) (core.OutboxEntry, error) {
	var o core.OutboxEntry
	err := r.one(&o, fmt.Sprintf("outbox %d", id), `SELECT data FROM outbox WHERE id = $1`, int64(id))
	return o, err
}

func (r *readTx) PendingOutbox(after core.OutboxID, limit int) ([]core.OutboxEntry, error) {
	return list[core.OutboxEntry](r, "pending outbox",
		`SELECT data FROM outbox WHERE pending AND id > $1 ORDER BY id LIMIT $2`, int64(after), lim(limit))
}

func (r *readTx) Seen(key string) (core.MessageID, error) {
	var id int64
	err := r.tx.QueryRow(r.ctx, `SELECT message FROM seen WHERE key = $1`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("dedup key %q: %w", key, core.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("dedup key %q: %w", key, err)
	}
	return core.MessageID(id), nil
}

// Todo returns nil, nil when no list is saved for (bot, thread).
func (r *readTx) Todo(bot core.ActorID, thread core.ThreadID) ([]core.TodoItem, error) {
	var items []core.TodoItem
	err := r.one(&items, "todo", `SELECT data FROM todos WHERE bot = $1 AND thread = $2`, string(bot), int64(thread))
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil
	}
	return items, err
}

// Activities returns only lines below the horizon: none it passes commits
// later.
func (r *readTx) Activities(after uint64, limit int) ([]core.Activity, error) {
	h, err := r.horizon("activity")
	if err != nil {
		return nil, err
	}
	return list[core.Activity](r, "activities",
		`SELECT data FROM activity WHERE seq > $1 AND seq < $3 ORDER BY seq LIMIT $2`, int64(after), lim(limit), h)
}

// Cursor returns "" and no error for an unset name.
func (r *readTx) Cursor(name string) (string, error) {
	var v string
	err := r.tx.QueryRow(r.ctx, `SELECT value FROM cursors WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cursor %q: %w", name, err)
	}
	return v, nil
}
