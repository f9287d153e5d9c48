package bolt

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// TestMigrateV2RunEventLog: a version 2 file (no run_event_log) is upgraded with
// its stored run events in the log, so the console's event stream can replay them,
// and later appends continue after them.
func TestMigrateV2RunEventLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = s.Update(ctx, func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "k"})
		if err != nil {
			return err
		}
		for range 2 {
			r, err := tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning})
			if err != nil {
				return err
			}
			for range 2 {
				if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text", Payload: json.RawMessage(`{}`)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make it a version 2 file: no run_event_log.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bktRunEventLog); err != nil {
			return err
		}
		return tx.Bucket(bktMeta).Put(keyVersion, u64(2))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open v2 file: %v", err)
	}
	defer s.Close()
	if got := fileSchema(t, s); got != SchemaVersion {
		t.Errorf("schema after upgrade = %d, want %d", got, SchemaVersion)
	}
	err = s.Update(ctx, func(tx core.Tx) error {
		_, err := tx.AppendRunEvent(core.RunEvent{Run: 1, Type: "text"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]uint64
	err = s.View(ctx, func(tx core.ReadTx) error {
		evs, err := tx.RunEventsSince(0, 0)
		for _, e := range evs {
			got = append(got, [3]uint64{e.Pos, uint64(e.Run), e.Seq})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after upgrade: %v", err)
	}
	want := [][3]uint64{{1, 1, 1}, {2, 1, 2}, {3, 2, 1}, {4, 2, 2}, {5, 1, 3}}
	if len(got) != len(want) {
		t.Fatalf("RunEventsSince after upgrade = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("RunEventsSince after upgrade = %v, want %v", got, want)
			break
		}
	}
}

// TestVerifyRunEventLog: a run event missing from run_event_log is reported.
func TestVerifyRunEventLog(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "v.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	err = s.Update(ctx, func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "k"})
		if err != nil {
			return err
		}
		r, err := tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning})
		if err != nil {
			return err
		}
		_, err = tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bktRunEventLog).Delete(u64(1)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx); err == nil || !strings.Contains(err.Error(), "run_event_log") {
		t.Errorf("Verify after losing a log entry = %v", err)
	}
}
