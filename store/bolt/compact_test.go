package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

// After pruning, Compact gives the freed pages back: the file shrinks, and what
// was kept is still there and verifies. A store in use is refused.
func TestCompactShrinksAfterPrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openbot.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old, now := pruneNow.Add(-1000*time.Hour), pruneNow
	big := strings.Repeat("x", 2000)
	for range 10 {
		err := s.Update(ctx, func(tx core.Tx) error {
			for range 200 {
				if err := tx.AppendActivity(core.Activity{Event: "e", Summary: big, At: old}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx core.Tx) error {
		return tx.AppendActivity(core.Activity{Event: "kept", Summary: "s", At: now})
	}); err != nil {
		t.Fatal(err)
	}
	for more := true; more; {
		_, more, err = s.Prune(ctx, core.PruneActivity, now.Add(-time.Hour), 500)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Compact(ctx, path, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Errorf("compact of a store in use: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := Compact(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact: %d -> %d bytes", res.Before, res.After)
	if res.After*4 > res.Before {
		t.Errorf("compact: %d -> %d bytes, want at most a quarter", res.Before, res.After)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkIndexes(t, s)
	err = s.View(ctx, func(tx core.ReadTx) error {
		acts, err := tx.Activities(0, 0)
		if len(acts) != 1 || acts[0].Event != "kept" {
			t.Errorf("activities after compact: %+v", acts)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
