package postgres_test

import (
	"testing"

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
