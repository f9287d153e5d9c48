package core_test

import (
	"path/filepath"
	"testing"

	"openbot/core"
	"openbot/core/sharedtest"
	"openbot/store/bolt"
)

// TestShared runs the shared-mode suite (core/sharedtest) with engines that
// share one bbolt handle, standing for processes that share a store; the
// PostgreSQL store runs it with one handle per engine (store/postgres).
func TestShared(t *testing.T) {
	sharedtest.Run(t, func(t *testing.T) sharedtest.Opener {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		bus := &sharedtest.HintBus{}
		return func(t *testing.T) (core.Store, core.Hinter) { return nopClose{st}, bus }
	})
}

// nopClose keeps the shared handle open until the test's cleanup closes it.
type nopClose struct{ core.Store }

func (nopClose) Close() error { return nil }
