package e2e

import (
	"os"
	"testing"

	"openbot/store/postgres/pgtest"
)

// TestMain starts the throwaway PostgreSQL cluster of the tests that share a
// database between openbot processes (pgtest), once, and stops it at the end.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
