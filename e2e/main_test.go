package e2e

import (
	"os"
	"testing"

	"openbot/store/postgres/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the package's tests
// that need one (the shared-store failover); it starts only when a test asks
// for it (pgtest.DSN), so the other tests cost nothing more. The openbot
// binary the kill tests share (buildOpenbot) is removed at the end.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	removeBuilt()
	os.Exit(code)
}
