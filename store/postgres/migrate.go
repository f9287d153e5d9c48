package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema lives in versioned SQL files, embedded in the binary:
// migrations/NNNN_what.sql upgrades version NNNN-1 to NNNN. Open applies those
// the database lacks, each in its own transaction that also records it in
// schema_migrations, while holding a session advisory lock so two processes
// starting together do not race (the second waits, then finds nothing to do).

//go:embed migrations/*.sql
var migrationFiles embed.FS

// lockClassMigrate is the first key of the session advisory lock migrations
// take (the second key is hashtext of the schema, so stores in different
// schemas of one database do not contend).
const lockClassMigrate = 0x0b08

// migration is one embedded SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order; versions must
// be 1, 2, 3... without gaps.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %q: name must be NNNN_what.sql", e.Name())
		}
		data, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this binary knows: the number of embedded
// migrations.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // embedded files are checked by the package tests
	}
	return len(ms)
}

// migrate brings the database up to upTo (0 = SchemaVersion) and returns the
// version it had before. A database newer than this binary fails with
// ErrNewerSchema and is left untouched.
func migrate(ctx context.Context, pool *pgxpool.Pool, upTo int, log *slog.Logger) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	if upTo <= 0 || upTo > len(ms) {
		upTo = len(ms)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, lockClassMigrate); err != nil {
		return 0, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx has ended.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, lockClassMigrate)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY,
		name    text NOT NULL,
		applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	var from int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&from); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if from > len(ms) {
		return from, fmt.Errorf("%w: database has schema version %d, this binary knows up to %d", ErrNewerSchema, from, len(ms))
	}
	for _, m := range ms[from:upTo] {
		log.Info("store migration", "to", m.version, "file", m.name)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return from, fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return from, nil
}

// ErrNewerSchema is returned (wrapped) by Open for a database written by a newer
// binary whose schema version this one does not know; nothing is changed.
var ErrNewerSchema = errors.New("store schema is newer than this binary supports")
