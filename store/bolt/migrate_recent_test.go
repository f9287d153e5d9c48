package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// openOlder writes an empty file of schema version v, which has every bucket
// of the current layout but missing, opens it (upgrading it) and checks it is
// at SchemaVersion. The store is closed when the test ends.
func openOlder(t *testing.T, v int, missing ...[]byte) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets() {
			if slices.ContainsFunc(missing, func(m []byte) bool { return string(m) == string(name) }) {
				continue
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktMeta).Put(keyVersion, u64(uint64(v))); err != nil {
			return err
		}
		return tx.Bucket(bktMeta).Put(keyQueuedCount, u64(0))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open a version %d file: %v", v, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	return s
}

// verifyAfter checks the upgraded file's invariants.
func verifyAfter(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Verify(context.Background()); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
}

// TestMigrateV4 upgrades a version 4 file (no memory buckets): memories and
// pending reflections can then be stored (seed §9, G7).
func TestMigrateV4(t *testing.T) {
	s := openOlder(t, 4, bktMemories, bktMemoryBot, bktReflections)
	err := s.Update(context.Background(), func(tx core.Tx) error {
		if _, err := tx.PutMemory(core.Memory{Bot: "eng", Text: "squash merges"}); err != nil {
			return err
		}
		_, err := tx.PutPendingReflection(core.PendingReflection{Bot: "eng", Thread: 1, Run: 1})
		return err
	})
	if err != nil {
		t.Fatalf("store memory after upgrade: %v", err)
	}
	verifyAfter(t, s)
}

// TestMigrateV5 upgrades a version 5 file (no message_vectors bucket): message
// vectors can then be stored and read (seed §9, the semantic index).
func TestMigrateV5(t *testing.T) {
	s := openOlder(t, 5, bktMessageVectors)
	ctx := context.Background()
	v := core.MessageVector{Thread: 1, Message: 2, Model: "p/m", Vector: []float32{1, 0}}
	if err := s.Update(ctx, func(tx core.Tx) error { return tx.PutMessageVector(v) }); err != nil {
		t.Fatalf("store a message vector after upgrade: %v", err)
	}
	var got []core.MessageVector
	if err := s.View(ctx, func(tx core.ReadTx) error {
		var err error
		got, err = tx.MessageVectors(1)
		return err
	}); err != nil || len(got) != 1 {
		t.Fatalf("MessageVectors after upgrade = %v, %v; want the one stored", got, err)
	}
	verifyAfter(t, s)
}

// TestMigrateV6 upgrades a version 6 file (no leases bucket): leases can then
// be stored and read (DESIGN.md §7, core/lease.go).
func TestMigrateV6(t *testing.T) {
	s := openOlder(t, 6, bktLeases)
	ctx := context.Background()
	l := core.Lease{Key: "lane/slack/a/C1", Owner: "p1#1", Until: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	if err := s.Update(ctx, func(tx core.Tx) error { return tx.PutLease(l) }); err != nil {
		t.Fatalf("store a lease after upgrade: %v", err)
	}
	var got core.Lease
	if err := s.View(ctx, func(tx core.ReadTx) error {
		var err error
		got, err = tx.Lease(l.Key)
		return err
	}); err != nil || got.Owner != l.Owner || !got.Until.Equal(l.Until) {
		t.Fatalf("Lease after upgrade = %+v, %v; want %+v", got, err, l)
	}
	verifyAfter(t, s)
}

// TestMigrateV7 upgrades a version 7 file, whose runs records hold their
// checkpoints: the upgrade moves each checkpoint into run_checkpoints and
// rewrites the record without it, and Run returns the run as it was.
func TestMigrateV7(t *testing.T) {
	created := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	runs := []core.Run{
		{ID: 1, Bot: "bot:eng", Thread: 1, Status: core.RunWaitingHuman, Question: 4, Created: created,
			Checkpoint: json.RawMessage(`{"messages":[{"role":"user","content":"ship it \u003cnow\u003e"}]}`)},
		{ID: 2, Bot: "bot:eng", Thread: 1, Status: core.RunCompleted, Created: created, Ended: created.Add(time.Minute)},
		{ID: 3, Bot: "bot:qa", Thread: 2, Status: core.RunRunning, Created: created, Usage: core.Usage{ModelCalls: 2},
			Checkpoint: json.RawMessage(`{"step":2}`)},
	}
	path := filepath.Join(t.TempDir(), "v7.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets() {
			if string(name) == "run_checkpoints" {
				continue
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bktMeta)
		if err := errors.Join(meta.Put(keyVersion, u64(7)), meta.Put(keyQueuedCount, u64(0)), tx.Bucket(bktRuns).SetSequence(3)); err != nil {
			return err
		}
		for _, r := range runs {
			data, err := json.Marshal(r) // version 7: the record holds the checkpoint
			if err != nil {
				return err
			}
			if err := tx.Bucket(bktRuns).Put(u64(uint64(r.ID)), data); err != nil {
				return err
			}
			if indexedRunStatus(r.Status) {
				if err := tx.Bucket(bktRunStatus).Put(statusKey(string(r.Status), uint64(r.ID)), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open a version 7 file: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	for _, want := range runs {
		record, cp := rawRun(t, s, want.ID)
		if _, ok := record["checkpoint"]; ok {
			t.Errorf("runs record of run %d still holds its checkpoint", want.ID)
		}
		if string(cp) != string(want.Checkpoint) {
			t.Errorf("run_checkpoints of run %d = %q, want %q", want.ID, cp, want.Checkpoint)
		}
		err := s.View(context.Background(), func(tx core.ReadTx) error {
			got, err := tx.Run(want.ID)
			if err != nil {
				return err
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("Run(%d) after upgrade = %s, want %s", want.ID, g, w)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	verifyAfter(t, s)
}
