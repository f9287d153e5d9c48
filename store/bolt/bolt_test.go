package bolt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "openbot.db"), Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return &verifyOnClose{Store: openTemp(t), t: t} })
}

// verifyOnClose runs Verify before the first Close, so a conformance subtest that
// leaves an index inconsistent with its records fails.
type verifyOnClose struct {
	*Store
	t *testing.T
}

func (v *verifyOnClose) Close() error {
	if !v.closed.Load() {
		checkIndexes(v.t, v.Store)
	}
	return v.Store.Close()
}

// checkIndexes verifies every index entry against the records and back, so a
// conformance subtest that leaves a stale entry fails here.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Verify(context.Background()); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "openbot.db") // parent dirs created
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := context.Background()
	var th core.Thread
	var m core.Message
	var it core.InboxItem
	err = s.Update(ctx, func(tx core.Tx) error {
		var err error
		if th, err = tx.PutThread(core.Thread{Key: "k", Created: time.Unix(1, 0).UTC()}); err != nil {
			return err
		}
		if m, err = tx.PutMessage(core.Message{Thread: th.ID, Text: "hi"}); err != nil {
			return err
		}
		if it, err = tx.PutItem(core.InboxItem{Actor: "bot:eng", Thread: th.ID, Kind: core.ItemMessage, Message: m.ID, Status: core.ItemQueued}); err != nil {
			return err
		}
		if err := tx.MarkSeen("d", m.ID); err != nil {
			return err
		}
		return tx.SetCursor("telegram/main", "77")
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	err = s.View(ctx, func(tx core.ReadTx) error {
		if got, err := tx.Thread(th.ID); err != nil || got.Key != "k" {
			t.Errorf("Thread after reopen = %+v, %v", got, err)
		}
		if got, err := tx.NextQueued("bot:eng", nil); err != nil || got.ID != it.ID {
			t.Errorf("NextQueued after reopen = %+v, %v", got, err)
		}
		if n, err := tx.CountQueued(); err != nil || n != 1 {
			t.Errorf("CountQueued after reopen = %d, %v", n, err)
		}
		if got, err := tx.Seen("d"); err != nil || got != m.ID {
			t.Errorf("Seen after reopen = %d, %v", got, err)
		}
		if got, _ := tx.Cursor("telegram/main"); got != "77" {
			t.Errorf("Cursor after reopen = %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	// IDs keep increasing across a reopen.
	err = s.Update(ctx, func(tx core.Tx) error {
		th2, err := tx.PutThread(core.Thread{Key: "k2"})
		if err == nil && th2.ID <= th.ID {
			t.Errorf("thread ID after reopen = %d, want > %d", th2.ID, th.ID)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Update after reopen: %v", err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openbot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	// flock conflicts between two open file descriptions, even in one process.
	_, err = Open(path, Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("error %q should name the path and say it is locked", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(notDir, "openbot.db"), Options{}); err == nil {
		t.Errorf("Open under a regular file succeeded")
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a bolt file", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage, Options{}); err == nil {
		t.Errorf("Open of a non-bbolt file succeeded")
	}
}

func TestRejectsInvalidRecords(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	var th core.Thread
	if err := s.Update(ctx, func(tx core.Tx) error {
		var err error
		th, err = tx.PutThread(core.Thread{Key: "k"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		fn   func(tx core.Tx) error
	}{
		{"system actor", func(tx core.Tx) error { return tx.PutActor(core.Actor{ID: core.SystemActor}) }},
		{"actor with NUL", func(tx core.Tx) error { return tx.PutActor(core.Actor{ID: "a\x00b"}) }},
		{"bot without handle", func(tx core.Tx) error { return tx.PutBot(core.BotProfile{}) }},
		{"message without thread", func(tx core.Tx) error { _, err := tx.PutMessage(core.Message{Text: "x"}); return err }},
		{"item without thread", func(tx core.Tx) error {
			_, err := tx.PutItem(core.InboxItem{Actor: "bot:a", Kind: core.ItemMessage, Status: core.ItemQueued})
			return err
		}},
		{"item without actor", func(tx core.Tx) error {
			_, err := tx.PutItem(core.InboxItem{Thread: th.ID, Kind: core.ItemMessage, Status: core.ItemQueued})
			return err
		}},
		{"item without status", func(tx core.Tx) error {
			_, err := tx.PutItem(core.InboxItem{Actor: "bot:a", Thread: th.ID, Kind: core.ItemMessage})
			return err
		}},
		{"run without status", func(tx core.Tx) error { _, err := tx.PutRun(core.Run{Bot: "bot:a", Thread: th.ID}); return err }},
		{"outbox without status", func(tx core.Tx) error { _, err := tx.PutOutbox(core.OutboxEntry{}); return err }},
		{"event of unknown run", func(tx core.Tx) error { _, err := tx.AppendRunEvent(core.RunEvent{Run: 42}); return err }},
		{"bind key to unknown thread", func(tx core.Tx) error { return tx.BindThreadKey("k", th.ID+1) }},
		{"empty dedup key", func(tx core.Tx) error { return tx.MarkSeen("", 1) }},
		{"empty cursor name", func(tx core.Tx) error { return tx.SetCursor("", "1") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Update(ctx, tc.fn); err == nil {
				t.Errorf("accepted")
			}
		})
	}
	checkIndexes(t, s)
}

// TestNextQueuedSeeksActorPrefix fills other mailboxes with many items and counts the
// items NextQueued decodes through skip: only the actor's own are offered.
func TestNextQueuedSeeksActorPrefix(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	err := s.Update(ctx, func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "k"})
		if err != nil {
			return err
		}
		// "bot:a" sorts before "bot:a2" and "bot:a\x01"-like neighbours; the 0x00
		// separator keeps "bot:a" from matching "bot:ab".
		for _, a := range []core.ActorID{"bot:ab", "bot:a", "bot:aa", "bot:b", "bot:ab"} {
			for range 50 {
				if _, err := tx.PutItem(core.InboxItem{Actor: a, Thread: th.ID, Kind: core.ItemMessage, Status: core.ItemQueued}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(tx core.ReadTx) error {
		offered := 0
		_, err := tx.NextQueued("bot:a", func(it core.InboxItem) bool {
			offered++
			if it.Actor != "bot:a" {
				t.Errorf("offered item of %q", it.Actor)
			}
			return true
		})
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("NextQueued(skip all) = %v", err)
		}
		if offered != 50 {
			t.Errorf("skip was offered %d items, want exactly bot:a's 50", offered)
		}
		return nil
	})
}

func TestBatchOptions(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "o.db"), Options{NoSync: true, MaxBatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.group.max != 7 || cap(s.group.queue) != 7*batchQueueFactor {
		t.Errorf("batch settings = %d, queue %d; want 7, %d", s.group.max, cap(s.group.queue), 7*batchQueueFactor)
	}
	if !s.db.NoSync {
		t.Errorf("NoSync not applied")
	}
}
