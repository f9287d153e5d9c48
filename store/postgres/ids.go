package postgres

import (
	"fmt"
)

// nextID draws the next value of the sequence ids_<kind> (migration 0006).
// Sequences are outside transactions: a rolled-back or retried write leaves a
// gap, and concurrent writers need not commit their IDs in order.
func (w *writeTx) nextID(kind string) (uint64, error) {
	var id int64
	if err := w.tx.QueryRow(w.ctx, `SELECT nextval('ids_`+kind+`')`).Scan(&id); err != nil {
		return 0, fmt.Errorf("next %s id: %w", kind, err)
	}
	return uint64(id), nil
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
	if _, err := w.tx.Exec(w.ctx, `INSERT INTO thread_locks (thread, n) VALUES ($1, 1)
		ON CONFLICT (thread) DO UPDATE SET n = thread_locks.n + 1`, int64(id)); err != nil {
		return fmt.Errorf("lock thread %d: %w", id, err)
	}
	w.locked[id] = true
	return nil
}
