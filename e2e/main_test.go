package e2e

import (
	"os"
	"testing"

	"openbot/store/postgres/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the package's tests
// that need one (the shared-store failover); it starts only when a test asks
// for it (pgtest.DSN), so the other tests cost nothing more.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
