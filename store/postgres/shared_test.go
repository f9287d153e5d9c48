package postgres_test

import (
	"context"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/sharedtest"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// TestShared runs the shared-mode suite (core/sharedtest) with one store
// handle, so one connection pool, per engine on one database: what separate
// openbot processes have. Hints are the store's own when it implements
// core.Hinter (LISTEN/NOTIFY), else the engines rely on the sweep.
func TestShared(t *testing.T) {
	sharedtest.Run(t, func(t *testing.T) sharedtest.Opener {
		dsn := pgtest.DSN(t)
		return func(t *testing.T) (core.Store, core.Hinter) {
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			var h core.Hinter
			if hs, ok := any(s).(core.Hinter); ok {
				h = hs
			}
			return s, h
		}
	})
}

// TestLeasesSurviveLongTransaction runs sharedtest.LeasesSurviveLongTransaction
// with the long transaction as another process's: a store handle of its own
// whose Update writes a lease of another key and stays open.
//
// It fails while every write transaction takes the schema-wide advisory lock
// (postgres.go, write): the long transaction holds it, every renewal waits for
// it ("take write lock: timeout"), and the first engine loses its lease and
// stops its run. Remove the skip with that lock.
func TestLeasesSurviveLongTransaction(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func(t *testing.T) (core.Store, core.Hinter) {
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s, s
	}
	other, _ := open(t)
	t.Cleanup(func() { _ = other.Close() })
	sharedtest.LeasesSurviveLongTransaction(t, open, func(ctx context.Context, opened func(), release <-chan struct{}) error {
		first := true
		return other.Update(ctx, func(tx core.Tx) error {
			if err := tx.PutLease(core.Lease{Key: core.LeaseKeyWorker("long-transaction"), Owner: "another-process#1", Until: time.Now().Add(time.Hour)}); err != nil {
				return err
			}
			if first { // an Update may run fn again after a conflict: open once
				first = false
				opened()
			}
			<-release
			return nil
		})
	})
}
