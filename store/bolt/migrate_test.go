package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// writeV0 builds a version 0 file by hand: the v0 buckets, no meta bucket (so no
// version key and no queued counter) and no item_status index, holding a thread, a
// message and items in every status with their v0 queue indexes.
func writeV0(t *testing.T, path string) []core.InboxItem {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items := []core.InboxItem{
		{ID: 1, Actor: "bot:eng", Thread: 1, Kind: core.ItemMessage, Message: 1, Status: core.ItemDone},
		{ID: 2, Actor: "bot:eng", Thread: 1, Kind: core.ItemMessage, Message: 1, Status: core.ItemProcessing},
		{ID: 3, Actor: "bot:qa", Thread: 1, Kind: core.ItemMessage, Message: 1, Status: core.ItemQueued},
		{ID: 4, Actor: "bot:eng", Thread: 1, Kind: core.ItemResume, Run: 1, Status: core.ItemQueued},
		{ID: 5, Actor: "bot:eng", Thread: 1, Kind: core.ItemMessage, Message: 1, Status: core.ItemCancelled},
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range v0Buckets() {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		put := func(bucket, key []byte, v any) error {
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			return tx.Bucket(bucket).Put(key, data)
		}
		if _, err := tx.Bucket(bktThreads).NextSequence(); err != nil {
			return err
		}
		if err := put(bktThreads, u64(1), core.Thread{ID: 1, Key: "slack:T1:C1:1"}); err != nil {
			return err
		}
		if err := tx.Bucket(bktThreadKeys).Put([]byte("slack:T1:C1:1"), u64(1)); err != nil {
			return err
		}
		if _, err := tx.Bucket(bktMessages).NextSequence(); err != nil {
			return err
		}
		if err := put(bktMessages, pairKey(1, 1), core.Message{ID: 1, Thread: 1, Text: "hello"}); err != nil {
			return err
		}
		if err := tx.Bucket(bktMessageThread).Put(u64(1), u64(1)); err != nil {
			return err
		}
		for _, it := range items {
			if _, err := tx.Bucket(bktItems).NextSequence(); err != nil {
				return err
			}
			if err := put(bktItems, u64(uint64(it.ID)), it); err != nil {
				return err
			}
			if it.Status == core.ItemQueued {
				if err := tx.Bucket(bktQueue).Put(queueKey(it.Actor, it.ID), nil); err != nil {
					return err
				}
				if err := tx.Bucket(bktQueueThread).Put(queueThreadKey(it.Actor, it.Thread, it.ID), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func TestMigrateV0(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v0.db")
	items := writeV0(t, path)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open v0 file: %v", err)
	}
	defer s.Close()
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	if err := s.Verify(context.Background()); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
	ctx := context.Background()
	err = s.View(ctx, func(tx core.ReadTx) error {
		for _, want := range items {
			got, err := tx.Item(want.ID)
			if err != nil || got != want {
				t.Errorf("Item(%d) = %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		if n, _ := tx.CountQueued(); n != 2 {
			t.Errorf("CountQueued = %d, want 2", n)
		}
		if q, _ := tx.ItemsByStatus(core.ItemQueued); len(q) != 2 || q[0].ID != 3 || q[1].ID != 4 {
			t.Errorf("ItemsByStatus(queued) = %+v, want items 3 and 4", q)
		}
		if p, _ := tx.ItemsByStatus(core.ItemProcessing); len(p) != 1 || p[0].ID != 2 {
			t.Errorf("ItemsByStatus(processing) = %+v, want item 2", p)
		}
		if it, err := tx.NextQueued("bot:eng", nil); err != nil || it.ID != 4 {
			t.Errorf("NextQueued(bot:eng) = %+v, %v; want item 4", it, err)
		}
		if m, err := tx.Message(1); err != nil || m.Text != "hello" {
			t.Errorf("Message(1) = %+v, %v", m, err)
		}
		if id, err := tx.ThreadByKey("slack:T1:C1:1"); err != nil || id != 1 {
			t.Errorf("ThreadByKey = %d, %v", id, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The upgraded file takes new writes with sequences continuing after v0's.
	err = s.Update(ctx, func(tx core.Tx) error {
		it, err := tx.PutItem(core.InboxItem{Actor: "bot:qa", Thread: 1, Kind: core.ItemMessage, Message: 1, Status: core.ItemQueued})
		if err == nil && it.ID != 6 {
			t.Errorf("new item ID = %d, want 6", it.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after write: %v", err)
	}
}

// TestMigrateV1 upgrades a version 1 file (no question buckets) to version 2: its
// data stays and questions can be stored.
func TestMigrateV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range v1Buckets() {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktMeta).Put(keyVersion, u64(1)); err != nil {
			return err
		}
		if err := tx.Bucket(bktMeta).Put(keyQueuedCount, u64(0)); err != nil {
			return err
		}
		if _, err := tx.Bucket(bktThreads).NextSequence(); err != nil {
			return err
		}
		data, _ := json.Marshal(core.Thread{ID: 1, Key: "console:local"})
		return tx.Bucket(bktThreads).Put(u64(1), data)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open v1 file: %v", err)
	}
	defer s.Close()
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	ctx := context.Background()
	err = s.Update(ctx, func(tx core.Tx) error {
		if th, err := tx.Thread(1); err != nil || th.Key != "console:local" {
			t.Errorf("Thread(1) = %+v, %v", th, err)
		}
		_, err := tx.PutQuestion(core.Question{Token: "abc", Kind: core.QuestionAsk, Run: 1, Bot: "bot:eng", Thread: 1, Status: core.QuestionPending})
		return err
	})
	if err != nil {
		t.Fatalf("store a question after upgrade: %v", err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
}

func TestNewFileGetsCurrentSchema(t *testing.T) {
	s := openTemp(t)
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema of a new file = %d, want %d", got, SchemaVersion)
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		for _, b := range allBuckets() {
			if tx.Bucket(b) == nil {
				t.Errorf("bucket %s missing", b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	setSchema(t, s, SchemaVersion+1)
	_ = s.Close()

	_, err = Open(path, Options{})
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open of a newer file = %v, want ErrNewerSchema", err)
	}
	// The refused file is untouched and can be opened by bbolt again (lock released).
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: DefaultTimeout, ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen raw: %v", err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		if v := decodeU64(tx.Bucket(bktMeta).Get(keyVersion)); v != SchemaVersion+1 {
			t.Errorf("version after refusal = %d, want %d", v, SchemaVersion+1)
		}
		return nil
	})
}

func TestMissingVersionKeyRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bktMeta).Delete(keyVersion) }); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(path, Options{}); err == nil {
		t.Fatalf("Open of a file with meta but no version succeeded")
	}
}

// TestMigrationsCoverEveryVersion keeps the list in step with SchemaVersion.
func TestMigrationsCoverEveryVersion(t *testing.T) {
	ms := migrations()
	if len(ms) != SchemaVersion {
		t.Fatalf("%d migrations for schema %d", len(ms), SchemaVersion)
	}
	for i, m := range ms {
		if m.from != i || m.fn == nil || m.desc == "" {
			t.Errorf("migration %d = {from %d, %q}, want from %d with a func and description", i, m.from, m.desc, i)
		}
	}
}

func fileSchema(t *testing.T, s *Store) int {
	t.Helper()
	var v uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		v = decodeU64(tx.Bucket(bktMeta).Get(keyVersion))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

func setSchema(t *testing.T, s *Store, v int) {
	t.Helper()
	if err := s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bktMeta).Put(keyVersion, u64(uint64(v))) }); err != nil {
		t.Fatal(err)
	}
}

// v0Buckets is the version 0 layout: the pre-release layout of this package, which
// had no meta bucket (so no version key and no queued counter) and no item_status
// index. A file that has the items bucket but no meta bucket is version 0.
func v0Buckets() [][]byte {
	var out [][]byte
	for _, b := range v1Buckets() {
		if string(b) != string(bktMeta) && string(b) != string(bktItemStatus) {
			out = append(out, b)
		}
	}
	return out
}

// v1Buckets is the version 1 layout: everything up to the question buckets.
func v1Buckets() [][]byte {
	all := allBuckets()
	for i, b := range all {
		if string(b) == string(bktQuestions) {
			return all[:i]
		}
	}
	return all
}
