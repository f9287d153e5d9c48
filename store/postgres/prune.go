package postgres

import (
	"context"
	"fmt"
	"time"

	"openbot/core"
)

var _ core.Pruning = (*Store)(nil)

// pruneSQL deletes at most $2 records of a kind older than $1 and returns how
// many it deleted (DESIGN.md §10 "retention"). Times are read from the records'
// JSON. Activity and outbox IDs grow with time, so their walk looks only at the
// oldest $2 * pruneScan rows; pending outbox entries are never deleted.
var pruneSQL = map[core.PruneKind]string{
	core.PruneActivity: `DELETE FROM activity WHERE seq IN (
		SELECT seq FROM (SELECT seq, data FROM activity ORDER BY seq LIMIT $2 * 4) s
		WHERE (data->>'at')::timestamptz < $1 ORDER BY seq LIMIT $2)`,
	core.PruneOutbox: `DELETE FROM outbox WHERE id IN (
		SELECT id FROM (SELECT id, pending, data FROM outbox ORDER BY id LIMIT $2 * 4) s
		WHERE NOT pending AND (data->>'created')::timestamptz < $1 ORDER BY id LIMIT $2)`,
	// Events of finished runs that ended (or, without an end, were created)
	// before the cutoff.
	core.PruneRunEvents: `DELETE FROM run_events WHERE (run, seq) IN (
		SELECT e.run, e.seq FROM run_events e JOIN runs r ON r.id = e.run
		WHERE r.status IN ('completed', 'failed', 'cancelled')
		AND coalesce(nullif(r.data->>'ended', '0001-01-01T00:00:00Z'), r.data->>'created')::timestamptz < $1
		ORDER BY e.pos LIMIT $2)`,
	// Dedup keys whose message is older than the cutoff or gone.
	core.PruneDedup: `DELETE FROM seen WHERE key IN (
		SELECT s.key FROM seen s LEFT JOIN messages m ON m.id = s.message
		WHERE m.id IS NULL OR (m.data->>'created')::timestamptz < $1 LIMIT $2)`,
	// Messages of threads whose newest message is older than the cutoff and
	// that have no queued or processing item and no unfinished run.
	core.PruneIdleMessages: `DELETE FROM messages WHERE id IN (
		SELECT m.id FROM messages m JOIN (
			SELECT thread FROM messages GROUP BY thread
			HAVING (array_agg(data->>'created' ORDER BY id DESC))[1]::timestamptz < $1) idle
		ON idle.thread = m.thread
		WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.thread = m.thread AND i.status IN ('queued', 'processing'))
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.status IN ('queued', 'running', 'waiting_human')
			AND (r.data->>'thread')::bigint = m.thread)
		ORDER BY m.id LIMIT $2)`,
}

// Prune implements core.Pruning: one short write transaction that deletes at
// most limit records of kind older than before; more is true when it deleted
// limit (call again). Unknown kinds and limit <= 0 are errors.
func (s *Store) Prune(ctx context.Context, kind core.PruneKind, before time.Time, limit int) (int, bool, error) {
	sql, ok := pruneSQL[kind]
	if !ok {
		return 0, false, fmt.Errorf("postgres: prune: unknown kind %q", kind)
	}
	if limit <= 0 {
		return 0, false, fmt.Errorf("postgres: prune %s: limit must be positive", kind)
	}
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	var n int
	err := s.write(ctx, func(w *writeTx) error {
		tag, err := w.tx.Exec(ctx, sql, before.UTC(), limit)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("postgres: prune %s: %w", kind, err)
	}
	return n, n >= limit, nil
}
