package bolt

import (
	"context"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// TestMigrateV5 upgrades a version 5 file (no message_vectors bucket): message
// vectors can then be stored and read (seed §9, the semantic index).
func TestMigrateV5(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v5.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets() {
			if string(name) == string(bktMessageVectors) {
				continue
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktMeta).Put(keyVersion, u64(5)); err != nil {
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
		t.Fatalf("Open v5 file: %v", err)
	}
	defer s.Close()
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
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
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
}
