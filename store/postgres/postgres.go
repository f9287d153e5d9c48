// Package postgres implements core.Store on PostgreSQL with pgx (DESIGN.md §7):
// the system of record for more than one openbot process sharing one database.
//
// Records are the JSON of the core types in json columns, beside the columns
// their indexes need (migrations/*.sql documents the layout). IDs come from a
// counters table written in the same transaction, so they are gapless from 1 and
// a rolled-back write assigns nothing, as with bbolt.
//
// Every write transaction (Update, Batch) first takes a transaction-scoped
// advisory lock, so writes are serialized across all processes sharing the
// database: the engine's read-then-write logic keeps the single-writer meaning
// DESIGN.md §7 gives it. Reads (View) run in REPEATABLE READ read-only
// transactions and never wait for writers. Only this package imports pgx.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"openbot/core"
)

// ErrClosed is returned by View, Update and Batch after Close.
var ErrClosed = errors.New("store is closed")

// DefaultConnectTimeout bounds Open's first connection and migrations when
// Options.ConnectTimeout is 0.
const DefaultConnectTimeout = 30 * time.Second

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Logger receives open and migration events; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the connection pool; 0 means 8. One connection serves
	// the writer, the rest readers.
	MaxConns int32
	// ConnectTimeout bounds connecting and migrating in Open; 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SchemaVersion stops migrations at that version (0 = the newest). Only for
	// tests of upgrades from an older schema.
	SchemaVersion int
}

// Store is the PostgreSQL core.Store. It is safe for concurrent use, also by
// many processes on one database.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	writer chan struct{} // one in-process writer at a time (capacity 1)
	group  *committer
	closed atomic.Bool
	where  string // host/database for messages, no password

	// channel is the NOTIFY channel of hints for this schema (hints.go).
	channel string
}

var _ core.Store = (*Store)(nil)

// Open connects to the database named by dsn (a libpq URL or key=value string;
// search_path picks a schema), applies the embedded migrations it lacks under an
// advisory lock, and returns the store. A database with a newer schema than
// SchemaVersion is refused with ErrNewerSchema. The caller must Close the store.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store postgres: parse dsn: %w", err)
	}
	cfg.MaxConns = 8
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(octx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store postgres %s: %w", where, err)
	}
	from, err := migrate(octx, pool, opts.SchemaVersion, log)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store postgres %s: %w", where, err)
	}
	var schema string
	if err := pool.QueryRow(octx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store postgres %s: current schema: %w", where, err)
	}
	log.Info("store opened", "driver", "postgres", "where", where, "schema", SchemaVersion(), "from_schema", from)
	s := &Store{pool: pool, log: log, writer: make(chan struct{}, 1), where: where, channel: hintChannel(schema)}
	s.group = newCommitter(s)
	return s, nil
}

// View runs fn in a read-only REPEATABLE READ transaction (one snapshot). It
// returns ctx.Err() without calling fn when ctx is done first, and ErrClosed
// after Close. Values returned are decoded copies that outlive the transaction.
func (s *Store) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.wrap("begin read", ctx, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(&readTx{ctx: ctx, tx: tx}); err != nil {
		return err
	}
	return nil
}

// Update runs fn in one read-write transaction and commits when fn returns nil;
// when fn returns an error nothing is written and that error is returned. Write
// transactions are serialized within the process and, by an advisory lock,
// across every process on the database; Update waits for its turn until ctx ends.
func (s *Store) Update(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(w *writeTx) error { return fn(w) })
}

// Batch is Update with group commit (DESIGN.md §7): concurrent callers share one
// transaction and one commit, without a timer (group.go). fn may run more than
// once; only the last run's writes land. A failing fn's error goes to its caller
// only.
func (s *Store) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.group.submit(ctx, fn)
}

// write takes the in-process writer slot, begins a transaction, takes the
// cross-process write lock and runs fn; it commits when fn returns nil.
func (s *Store) write(ctx context.Context, fn func(*writeTx) error) error {
	select {
	case s.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writer }()
	if err := s.begin(ctx); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap("begin write", ctx, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, lockClassWrite); err != nil {
		return s.wrap("take write lock", ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &writeTx{readTx{ctx: ctx, tx: tx, ids: &idCache{}}}
	if err := fn(w); err != nil {
		return err
	}
	if err := w.ids.flush(ctx, tx); err != nil {
		return s.wrap("commit", ctx, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.wrap("commit", ctx, err)
	}
	return nil
}

// Close answers queued Batch calls with ErrClosed, waits for transactions in
// flight and closes the pool. Later calls fail with ErrClosed; a second Close
// returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.group.close()
	s.pool.Close()
	return nil
}

func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("store postgres %s: %w", s.where, ErrClosed)
	}
	return ctx.Err()
}

// wrap names the store in a database error; a context error stays matchable.
func (s *Store) wrap(what string, ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("store postgres %s: %s: %w (%w)", s.where, what, err, cerr)
	}
	return fmt.Errorf("store postgres %s: %s: %w", s.where, what, err)
}
