// Package bolt implements core.Store on go.etcd.io/bbolt (DESIGN.md §7): one file,
// one writer, every multi-record change one transaction, ordered keys big-endian
// uint64 from NextSequence so "oldest first" is a cursor seek. The file carries a
// schema version and is upgraded by ordered migrations at Open (schema.go).
//
// Records are JSON-encoded values of the core types; the bucket layout and key
// encodings are documented in schema.go. Only this package imports bbolt.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// DefaultTimeout is how long Open waits for the file lock when Options.Timeout is 0.
const DefaultTimeout = time.Second

// ErrLocked is returned (wrapped, with the path) by Open when another process holds
// the file lock for longer than Options.Timeout.
var ErrLocked = errors.New("store is locked by another process")

// ErrClosed is returned by View, Update and Batch after Close.
var ErrClosed = errors.New("store is closed")

// ErrNewerSchema is returned (wrapped) by Open for a file written by a newer binary
// whose schema version this one does not know; the file is left untouched.
var ErrNewerSchema = errors.New("store schema is newer than this binary supports")

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Logger receives open and migration events; nil discards them.
	Logger *slog.Logger
	// Timeout bounds the wait for the file lock; 0 means DefaultTimeout. A second
	// process opening the same file fails with ErrLocked after it.
	Timeout time.Duration
	// NoSync skips fsync on commit. Only for tests and benchmarks: a crash can
	// corrupt the file.
	NoSync bool
	// MaxBatchSize bounds how many Batch calls share one commit; 0 means
	// DefaultMaxBatchSize (1000). Up to 4 groups of this size wait in a bounded
	// queue; later callers block in Batch until there is room or their ctx ends.
	MaxBatchSize int
}

// Store is the bbolt core.Store. It is safe for concurrent use; bbolt runs at most
// one read-write transaction at a time and any number of readers.
type Store struct {
	db     *bbolt.DB
	path   string
	log    *slog.Logger
	group  *committer
	closed atomic.Bool
}

var _ core.Store = (*Store)(nil)

// Open opens or creates the store file at path, creating its parent directory. It
// takes the file lock (waiting at most opts.Timeout, then ErrLocked), creates every
// bucket, and upgrades an older schema in one transaction; a file with a newer schema
// than SchemaVersion is refused with ErrNewerSchema. The caller must Close the store.
func Open(path string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store %s: create directory: %w", path, err)
		}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout, NoSync: opts.NoSync})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("store %s: %w (waited %s)", path, ErrLocked, timeout)
		}
		return nil, fmt.Errorf("store %s: open: %w", path, err)
	}
	from, err := upgrade(db, log)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	log.Info("store opened", "path", path, "schema", SchemaVersion, "from_schema", from)
	closedErr := fmt.Errorf("store %s: %w", path, ErrClosed)
	return &Store{db: db, path: path, log: log, group: newCommitter(db, opts.MaxBatchSize, closedErr)}, nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// View runs fn in a read-only transaction. It returns ctx.Err() without calling fn
// when ctx is done before the transaction starts, and ErrClosed after Close. Values returned by the ReadTx
// are decoded copies and stay valid after fn returns; the ReadTx itself must not be
// used after fn returns.
func (s *Store) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.db.View(func(btx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(&readTx{tx: btx})
	})
}

// Update runs fn in one read-write transaction and commits (with fsync unless
// Options.NoSync) when fn returns nil; when fn returns an error, nothing is written
// and that error is returned. It blocks while another write transaction runs; if
// ctx is done once the write lock is held, fn is not called and ctx.Err() returned.
func (s *Store) Update(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.group.alone(func(btx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(&writeTx{readTx{tx: btx}})
	})
}

// Batch is Update with group commit (group.go): concurrent callers share one
// transaction and one fsync, with no timer, so a lone call commits at once and the
// calls that arrive during a commit share the next one (at most
// Options.MaxBatchSize each). It returns ctx.Err() if ctx ends before fn's group
// starts (fn then does not run) and ErrClosed if the store closes first. fn runs on
// the committer goroutine and may run more than once: when it fails (or panics) in
// a group, the group rolls back, the others commit without it and fn runs again
// alone on the caller's goroutine, whose result (or panic) is the caller's. Only the
// last run's writes land, so apart from them fn must be idempotent (reset captured
// results at its start), as with bbolt's db.Batch.
func (s *Store) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.group.submit(ctx, func(btx *bbolt.Tx) error { return fn(&writeTx{readTx{tx: btx}}) })
}

// CommitStats are the totals of a Store's commits since Open (Store.CommitStats;
// an Update, or a Batch call run alone, is a commit of one write): how many
// commits, how many writes they carried, and
// the time the single writer spent in them, from each transaction's start to the
// end of its commit (its fsyncs included).
type CommitStats struct {
	Commits int64
	Writes  int64
	Busy    time.Duration
}

// CommitStats reads the totals of the group commits since Open (DESIGN.md §7,
// group commit): Busy over a wall-clock interval is the share of it the writer
// was taken, which is what an ingest may wait for.
func (s *Store) CommitStats() CommitStats {
	c := &s.group.stats
	return CommitStats{Commits: c.commits.Load(), Writes: c.writes.Load(), Busy: time.Duration(c.busy.Load())}
}

// OnCommit makes every commit that succeeds (a group, an Update, a Batch call
// run alone) call f, on the goroutine that committed, with the number of writes
// it carried and its duration (the
// transaction's start to the end of its commit, fsyncs included); nil stops it.
// f must return quickly: the next commit waits for it. For metrics (a disk
// whose syncs stall shows here first).
func (s *Store) OnCommit(f func(writes int, d time.Duration)) {
	if f == nil {
		s.group.observe.Store(nil)
		return
	}
	s.group.observe.Store(&f)
}

// Close waits for open transactions and the Batch group in flight to finish, answers
// Batch calls still queued with ErrClosed, and closes the file. Later calls of
// View, Update and Batch return ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.group.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store %s: close: %w", s.path, err)
	}
	return nil
}

func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	return ctx.Err()
}
