package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/store/dump"
)

// importBatch is how many rows Import sends per round trip.
const importBatch = 500

// Import copies a record stream (package dump) into this store in ONE
// transaction, keeping every ID, then sets the ID sequences, so the copy assigns
// the next IDs its source would have. The store must be empty (a fresh
// database): otherwise Import fails and writes nothing. source calls emit once
// per record and returns the source's ID counters; an error from source or from
// a write rolls everything back.
func (s *Store) Import(ctx context.Context, source func(emit func(dump.Record) error) (dump.Counters, error)) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(w *writeTx) error {
		for _, kind := range dump.AllKinds {
			var has bool
			if err := w.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{kind}.Sanitize()+`)`).Scan(&has); err != nil {
				return fmt.Errorf("import: check %s: %w", kind, err)
			}
			if has {
				return fmt.Errorf("import: the target store is not empty (%s has rows); migrate into a new database", kind)
			}
		}
		counters, err := source(func(r dump.Record) error {
			sql, args, err := importRow(r)
			if err != nil {
				return err
			}
			w.tx.later(r.Kind, sql, args...)
			if len(w.tx.whats) >= importBatch {
				return w.tx.flush(ctx)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if err := w.tx.flush(ctx); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		for name, v := range counters {
			if v == 0 {
				continue
			}
			if _, err := w.tx.Exec(ctx, `SELECT setval(('ids_' || $1)::regclass, $2)`, name, int64(v)); err != nil {
				return fmt.Errorf("import: counter %s: %w", name, err)
			}
		}
		return nil
	})
}

// importRow is the INSERT of one record, with its key columns and JSON.
func importRow(r dump.Record) (string, []any, error) {
	js := func(v any) []byte {
		data, _ := json.Marshal(v) // core types always encode
		return data
	}
	switch v := r.Value.(type) {
	case core.Actor:
		return `INSERT INTO actors (id, data) VALUES ($1, $2)`, []any{string(v.ID), js(v)}, nil
	case core.BotProfile:
		return `INSERT INTO bots (handle, data) VALUES ($1, $2)`, []any{v.Handle, js(v)}, nil
	case core.Thread:
		return `INSERT INTO threads (id, data) VALUES ($1, $2)`, []any{int64(v.ID), js(v)}, nil
	case dump.ThreadKey:
		return `INSERT INTO thread_keys (key, thread) VALUES ($1, $2)`, []any{v.Key, int64(v.Thread)}, nil
	case core.Message:
		return `INSERT INTO messages (id, thread, data) VALUES ($1, $2, $3)`, []any{int64(v.ID), int64(v.Thread), js(v)}, nil
	case core.InboxItem:
		return `INSERT INTO items (id, actor, thread, status, data) VALUES ($1, $2, $3, $4, $5)`,
			[]any{int64(v.ID), string(v.Actor), int64(v.Thread), string(v.Status), js(v)}, nil
	case core.Run:
		return `INSERT INTO runs (id, status, data) VALUES ($1, $2, $3)`, []any{int64(v.ID), string(v.Status), js(v)}, nil
	case core.LoggedRunEvent:
		return `INSERT INTO run_events (run, seq, pos, data) VALUES ($1, $2, $3, $4)`,
			[]any{int64(v.Run), int64(v.Seq), int64(v.Pos), js(v.RunEvent)}, nil
	case core.OutboxEntry:
		return `INSERT INTO outbox (id, pending, data) VALUES ($1, $2, $3)`, []any{int64(v.ID), v.Status == core.OutboxPending, js(v)}, nil
	case dump.SeenKey:
		return `INSERT INTO seen (key, message) VALUES ($1, $2)`, []any{v.Key, int64(v.Message)}, nil
	case dump.Todo:
		return `INSERT INTO todos (bot, thread, data) VALUES ($1, $2, $3)`, []any{string(v.Bot), int64(v.Thread), js(v.Items)}, nil
	case core.Activity:
		return `INSERT INTO activity (seq, data) VALUES ($1, $2)`, []any{int64(v.Seq), js(v)}, nil
	case dump.Cursor:
		return `INSERT INTO cursors (name, value) VALUES ($1, $2)`, []any{v.Name, v.Value}, nil
	case core.Question:
		return `INSERT INTO questions (id, token, pending, data) VALUES ($1, $2, $3, $4)`,
			[]any{int64(v.ID), v.Token, v.Status == core.QuestionPending, js(v)}, nil
	case core.UsageEntry:
		return `INSERT INTO usage (seq, key, data) VALUES ($1, $2, $3)`, []any{int64(v.Seq), v.Key, js(v)}, nil
	case core.Memory:
		return `INSERT INTO memories (id, bot, data) VALUES ($1, $2, $3)`, []any{int64(v.ID), v.Bot, js(v)}, nil
	case core.PendingReflection:
		return `INSERT INTO pending_reflections (seq, data) VALUES ($1, $2)`, []any{int64(v.Seq), js(v)}, nil
	case core.MessageVector:
		return `INSERT INTO message_vectors (thread, message, data) VALUES ($1, $2, $3)`,
			[]any{int64(v.Thread), int64(v.Message), js(v)}, nil
	case dump.UsageTotal:
		return `INSERT INTO usage_totals (scope, data) VALUES ($1, $2)`, []any{v.Scope, js(v.Total)}, nil
	}
	return "", nil, fmt.Errorf("record of kind %s: unknown value %T", r.Kind, r.Value)
}

// Counts returns the number of records of every dump kind, read in one
// snapshot: what `openbot store migrate` compares with its source.
func (s *Store) Counts(ctx context.Context) (dump.Counts, error) {
	out := dump.Counts{}
	err := s.View(ctx, func(rt core.ReadTx) error {
		r := rt.(*readTx)
		for _, kind := range dump.AllKinds {
			var n int
			if err := r.tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{kind}.Sanitize()).Scan(&n); err != nil {
				return fmt.Errorf("count %s: %w", kind, err)
			}
			out[kind] = n
		}
		return nil
	})
	return out, err
}
