package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
	"openbot/store/postgres"
)

// openStore opens the store the config names (DESIGN.md §7): the bbolt file at
// store.path (default), or the PostgreSQL database at store.dsn, migrated to
// this binary's schema, for serving: exclusively, since the engine is one process
// per store until leases exist. boltTimeout bounds the wait for the bbolt file
// lock (0 = bolt's default; a held lock wraps bolt.ErrLocked); a database another
// serve holds fails at once with postgres.ErrInUse. The CLI's readers open
// PostgreSQL without that lock (viewPostgres).
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, boltTimeout time.Duration) (core.Store, error) {
	switch cfg.Store.Driver {
	case config.StorePostgres:
		st, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{Logger: log, Exclusive: true})
		if err != nil {
			return nil, err
		}
		return st, nil
	case config.StoreBolt, "":
		st, err := bolt.Open(cfg.Store.Path, bolt.Options{Logger: log, Timeout: boltTimeout})
		if err != nil {
			return nil, err
		}
		return st, nil
	default:
		return nil, fmt.Errorf("store.driver: %q is not %s or %s", cfg.Store.Driver, config.StoreBolt, config.StorePostgres)
	}
}

// viewPostgres opens the PostgreSQL store of cfg, reads with fn in one View and
// closes it: the CLI's read path, which needs no running server since the
// database has no file lock.
func viewPostgres[T any](ctx context.Context, cfg *config.Config, fn func(core.ReadTx) (T, error)) (T, error) {
	var out T
	st, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{MaxConns: 2})
	if err != nil {
		return out, err
	}
	defer st.Close()
	err = st.View(ctx, func(tx core.ReadTx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}
