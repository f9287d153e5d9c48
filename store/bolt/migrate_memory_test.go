package bolt

import (
	"context"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// TestMigrateV4 upgrades a version 4 file (no memory buckets): memories and
// pending reflections can then be stored (seed §9, G7).
func TestMigrateV4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets() {
			if string(name) == string(bktMemories) || string(name) == string(bktMemoryBot) || string(name) == string(bktReflections) {
				continue
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktMeta).Put(keyVersion, u64(4)); err != nil {
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
		t.Fatalf("Open v4 file: %v", err)
	}
	defer s.Close()
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	ctx := context.Background()
	err = s.Update(ctx, func(tx core.Tx) error {
		if _, err := tx.PutMemory(core.Memory{Bot: "eng", Text: "squash merges"}); err != nil {
			return err
		}
		_, err := tx.PutPendingReflection(core.PendingReflection{Bot: "eng", Thread: 1, Run: 1})
		return err
	})
	if err != nil {
		t.Fatalf("store memory after upgrade: %v", err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
}
