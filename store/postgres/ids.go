package postgres

import (
	"fmt"
)

// followed numbers the kinds of ID that readers follow with an "after"
// cursor (MessagesSince, Activities, RunEventsSince, UsageEntries): the kind
// is the top 16 bits of the advisory lock key that marks a transaction
// drawing such IDs (nextID, horizon).
var followed = map[string]int64{"messages": 1, "activity": 2, "run_event_log": 3, "usage": 4}

// nextID draws the next value of the sequence ids_<kind> (migration 0006).
// Sequences are outside transactions: a rolled-back or retried write leaves a
// gap, and concurrent writers need not commit their IDs in order. Before its
// first ID of a followed kind, a transaction takes a shared advisory lock
// whose key holds the kind and the sequence's last value, at most any ID it
// will draw; it lasts until the transaction ends, so readers can tell which
// IDs may still commit (horizon).
func (w *writeTx) nextID(kind string) (uint64, error) {
	q := `SELECT nextval('ids_` + kind + `')`
	k, mark := followed[kind]
	if mark = mark && !w.marked[kind]; mark {
		q = fmt.Sprintf(`WITH low AS (SELECT pg_advisory_xact_lock_shared(%d + last_value) FROM ids_%s)
			SELECT nextval('ids_%s') FROM low`, k<<48, kind, kind)
	}
	var id int64
	if err := w.tx.QueryRow(w.ctx, q).Scan(&id); err != nil {
		return 0, fmt.Errorf("next %s id: %w", kind, err)
	}
	if mark {
		w.marked[kind] = true
	}
	return uint64(id), nil
}

// horizon is the lowest ID of a followed kind that another transaction in
// flight may still commit (math.MaxInt64 when none may): a reader following
// IDs in order returns only those below it, so none it passed commits later.
// The locks are read after the transaction's snapshot was taken, so an ID
// drawn by a transaction that had no lock yet is above every ID visible.
func (r *readTx) horizon(kind string) (int64, error) {
	k := followed[kind]
	var h int64
	err := r.tx.QueryRow(r.ctx, `SELECT coalesce(min((classid::bigint << 32 | objid::bigint) - $1), 9223372036854775807)
		FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint >> 16 = $2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND pid <> pg_backend_pid()`,
		k<<48, k).Scan(&h)
	if err != nil {
		return 0, fmt.Errorf("%s horizon: %w", kind, err)
	}
	return h, nil
}

// lockThread takes the thread's lock row for the rest of the transaction,
// once per transaction: every write of a thread's records comes after it. Two
// transactions writing one thread conflict here; the later one waits, then
// fails with a serialization error (its snapshot predates the other's commit)
// and Store.write runs it again, so the writes of one thread are serial while
// other threads' proceed in parallel.
func (w *writeTx) lockThread(id uint64) error {
	if id == 0 || w.locked[id] {
		return nil
	}
	w.tx.later(fmt.Sprintf("lock thread %d", id), `INSERT INTO thread_locks (thread, n) VALUES ($1, 1)
		ON CONFLICT (thread) DO UPDATE SET n = thread_locks.n + 1`, int64(id))
	w.locked[id] = true
	return nil
}
