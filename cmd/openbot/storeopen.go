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
// this binary's schema, for serving. Several processes may serve one PostgreSQL
// database: they share it through leases (engineShared). boltTimeout bounds the
// wait for the bbolt file lock (0 = bolt's default; a held lock wraps
// bolt.ErrLocked).
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, boltTimeout time.Duration) (core.Store, error) {
	switch cfg.Store.Driver {
	case config.StorePostgres:
		st, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{Logger: log})
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

// engineShared fills the shared-store fields of opts (DESIGN.md §7): with driver
// postgres the engine shares st with other processes, claims work under
// store.process_id with store.lease_ttl, and takes wake-ups from st when it
// carries them (core.Hinter); with bbolt (one process) it leaves them unset.
func engineShared(opts *core.Options, cfg *config.Config, st core.Store) {
	if cfg.Store.Driver != config.StorePostgres {
		return
	}
	opts.Shared, opts.ProcessID, opts.LeaseTTL = true, cfg.Store.ProcessID, cfg.Store.LeaseTTL
	if h, ok := st.(core.Hinter); ok {
		opts.Hints = h
	}
}
