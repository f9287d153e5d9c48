// Package postgres implements core.Store on PostgreSQL with pgx (DESIGN.md §7):
// the system of record for more than one openbot process sharing one database.
//
// Records are the JSON of the core types in json columns, beside the columns
// their indexes need (migrations/*.sql documents the layout). IDs come from
// one sequence per kind, so a rolled-back write leaves a gap.
//
// No lock spans the schema: write transactions (Update, Batch) of any number
// of processes run at once, at REPEATABLE READ. What they must not do at once
// they cannot: a write of a thread's records first takes the thread's lock row
// (lockThread), deduplication keys and tokens are unique constraints, and a
// transaction that loses a race (a serialization failure, a deadlock, a unique
// violation) or its connection before commit is rolled back and run again on
// a fresh snapshot (write). So each transaction behaves as if it ran alone,
// which is what the engine's read-then-write logic needs. Reads (View) run in
// REPEATABLE READ read-only transactions and never wait for writers; one that
// loses its connection is run again too. Only this package imports pgx.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	// MaxConns bounds the connection pool, shared by readers and writers;
	// 0 means the DSN's pool_max_conns, else 8.
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
	if !strings.Contains(dsn, "pool_max_conns") { // the DSN's own setting wins
		cfg.MaxConns = 8
	}
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
	s := &Store{pool: pool, log: log, where: where, channel: hintChannel(schema)}
	return s, nil
}

// View runs fn in a read-only REPEATABLE READ transaction (one snapshot). It
// returns ctx.Err() without calling fn when ctx is done first, and ErrClosed
// after Close. fn may run more than once: when the transaction fails for a
// reason write would run again for (retryable: a lost connection, a restarting
// server, a statement timeout), in BEGIN or in one of fn's statements, fn runs
// again in a new transaction on a fresh snapshot (retry), and only the last
// run's results count. Values returned are decoded copies that outlive the
// transaction.
func (s *Store) View(ctx context.Context, fn func(core.ReadTx) error) error {
	return s.retry(ctx, "read", func() (error, bool) { return s.read(ctx, fn), true })
}

// read is one run of View.
func (s *Store) read(ctx context.Context, fn func(core.ReadTx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.wrap("begin read", ctx, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return fn(&readTx{ctx: ctx, tx: &pipe{conn: tx.Conn()}})
}

// Update runs fn in one read-write transaction and commits when fn returns nil;
// when fn returns an error nothing is written and that error is returned. fn
// may run more than once: when the transaction loses a race with another
// writer or its connection before commit, it is rolled back and run again
// (write), and only the last run's writes land.
func (s *Store) Update(ctx context.Context, fn func(core.Tx) error) error {
	return s.write(ctx, func(w *writeTx) error { return fn(w) })
}

// Batch is Update: on PostgreSQL concurrent write transactions run at once
// and their commits share the server's WAL flushes, so there is nothing to
// group here (a group in one transaction would make every call of it run
// again when one of them loses a race).
func (s *Store) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return s.Update(ctx, fn)
}

// Retries of a transaction (write, View): the pause before attempt n+1 is
// random up to retryBase<<n, at most retryMaxConflictPause after a lost race
// and retryMaxPause after a connection failure or timeout; after retryBudget
// the last error is returned.
const (
	retryBase             = 2 * time.Millisecond
	retryMaxConflictPause = 20 * time.Millisecond
	retryMaxPause         = time.Second
	retryBudget           = 30 * time.Second
)

// write runs fn in a read-write transaction and commits when fn returns nil.
// A transaction that failed for a reason another run can cure (retryable) is
// rolled back and run again (retry). A COMMIT whose outcome is unknown (the
// connection broke after COMMIT was sent, with no answer) is not run again:
// its error is returned. A COMMIT the server answered with an error, or one
// that never left, surely did not commit and is retried.
func (s *Store) write(ctx context.Context, fn func(*writeTx) error) error {
	return s.retry(ctx, "write", func() (error, bool) {
		err, committing := s.attempt(ctx, fn)
		var pg *pgconn.PgError
		return err, !committing || errors.As(err, &pg) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err)
	})
}

// retry runs op until it succeeds, fails for a reason another run cannot
// cure, leaves its outcome unknown (sure false), ctx ends or retryBudget has
// passed, pausing a short random while between runs; what names it in logs.
func (s *Store) retry(ctx context.Context, what string, op func() (err error, sure bool)) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err, sure := op()
		why := retryable(err)
		if why == "" || !sure || ctx.Err() != nil || time.Since(start) > retryBudget {
			if why != "" && attempt > 1 {
				s.log.Warn("store "+what+" failed after retries", "where", s.where, "attempts", attempt, "err", err)
			}
			return err
		}
		level := slog.LevelDebug
		if why != "conflict" || attempt >= 5 {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "store "+what+" retried", "where", s.where, "why", why, "attempt", attempt, "err", err)
		ceiling := retryMaxPause
		if why == "conflict" { // the winner has committed or rolled back: try again soon
			ceiling = retryMaxConflictPause
		}
		pause := time.Duration(rand.Int64N(int64(min(retryBase<<min(attempt, 20), ceiling)) + 1))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
	}
}

// attempt is one run of write; committing is true when fn succeeded and the
// error came from the round trip that carried COMMIT. BEGIN is not sent on its
// own: it waits in the pipe and goes with fn's first statement that is read,
// and fn's last waiting writes go with COMMIT.
func (s *Store) attempt(ctx context.Context, fn func(*writeTx) error) (err error, committing bool) {
	if err := s.begin(ctx); err != nil {
		return err, false
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.wrap("begin write", ctx, err), false
	}
	defer release(context.WithoutCancel(ctx), c)
	p := &pipe{conn: c.Conn()}
	p.later("begin write", beginWrite)
	w := &writeTx{readTx: readTx{ctx: ctx, tx: p}, locked: map[uint64]bool{}, marked: map[string]bool{}}
	if err := fn(w); err != nil {
		return err, false
	}
	if err := p.commit(ctx); err != nil {
		return s.wrap("commit", ctx, err), true
	}
	return nil, false
}

// beginWrite begins a write transaction.
const beginWrite = "BEGIN ISOLATION LEVEL REPEATABLE READ"

// release returns a write transaction's connection to the pool: a transaction
// still open or failed on it is rolled back first, and a connection whose
// ROLLBACK fails is closed, since its state is unknown. The pool destroys a
// connection that is closed, busy or still in a transaction instead of
// keeping it (pgxpool.Conn.Release), so none goes back mid-transaction.
func release(ctx context.Context, c *pgxpool.Conn) {
	conn := c.Conn()
	if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			_ = conn.Close(ctx)
		}
	}
	c.Release()
}

// retryable says why running a failed transaction (write, View) again may
// succeed:
// "conflict" when it lost a race with another writer (serialization failure,
// deadlock, unique violation, or a statement run after one of those in the
// aborted transaction), "connection" when the connection broke or the server
// is restarting, "timeout" when a statement hit statement_timeout; "" when it
// would fail the same way (bad input, a missing record, a canceled ctx).
func retryable(err error) string {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrClosed) {
		return ""
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "40001", pg.Code == "40P01", pg.Code == "23505", pg.Code == "25P02":
			return "conflict"
		case pg.Code == "57014":
			return "timeout"
		case strings.HasPrefix(pg.Code, "08"), pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03":
			return "connection"
		}
		return ""
	}
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return "conflict" // fn ignored a failed statement; the commit rolled back
	}
	var ne net.Error
	if pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) {
		return "connection"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return "connection"
	}
	return ""
}

// Close waits for transactions in flight and closes the pool. Later calls fail with ErrClosed; a second Close
// returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
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
