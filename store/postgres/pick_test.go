package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/store/postgres"
)

// TestNextQueuedSeeksTheIndex: behind a history of 100,000 completed items, with
// 100,000 queued (10,000 per bot), the queue page query is a seek into
// items_queue that reads one page of rows, not a walk of the table in id order
// that filters out the history first (a pick costs the same with 100 or 100,000
// queued items, DESIGN.md §7); and NextQueued walks pages past skipped items.
func TestNextQueuedSeeksTheIndex(t *testing.T) {
	s, dsn := open(t, postgres.Options{MaxConns: 2})
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(t.Context())
	_, err = conn.Exec(t.Context(), `INSERT INTO items (id, actor, thread, status, data)
		SELECT g, 'bot:b' || (g % 10), g % 1000, CASE WHEN g <= 100000 THEN 'completed' ELSE 'queued' END,
		       json_build_object('id', g, 'actor', 'bot:b' || (g % 10), 'thread', g % 1000, 'kind', 'message', 'message', g,
		                         'status', CASE WHEN g <= 100000 THEN 'completed' ELSE 'queued' END, 'created', '2026-01-01T00:00:00Z')
		FROM generate_series(1, 200000) g;
		ANALYZE items`)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	var plan []string
	rows, err := conn.Query(t.Context(), "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+postgres.NextQueuedSQL, "bot:b3", 0, 8)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan using items_queue on items") || strings.Contains(text, "Seq Scan") ||
		strings.Contains(text, "Sort") || strings.Contains(text, "Rows Removed") || !strings.Contains(text, "actual rows=8 loops=1") {
		t.Errorf("queue page plan is not a bounded seek into items_queue:\n%s", text)
	}

	// Skipping: the first queued item of bot:b3 not in threads below 500 is
	// 100503, the 51st in its queue (100003 ... 100493 are threads 3 ... 493),
	// past the first pages.
	err = s.View(t.Context(), func(tx core.ReadTx) error {
		it, err := tx.NextQueued("bot:b3", func(it core.InboxItem) bool { return it.Thread < 500 })
		if err != nil {
			return err
		}
		if it.ID != 100503 || it.Thread != 503 {
			t.Errorf("NextQueued past skipped items = item %d (thread %d), want 100503 in thread 503", it.ID, it.Thread)
		}
		first, err := tx.NextQueued("bot:b3", nil)
		if err != nil || first.ID != 100003 {
			t.Errorf("NextQueued = item %d, %v; want 100003", first.ID, err)
		}
		_, err = tx.NextQueued("bot:b3", func(core.InboxItem) bool { return true })
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("NextQueued skipping everything: %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
}
