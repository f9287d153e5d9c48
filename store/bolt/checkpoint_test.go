package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
	"openbot/store/dump"
)

// rawRun is the stored runs record of id and the bytes under id in the
// run_checkpoints bucket (nil when absent), read straight from the file.
func rawRun(t *testing.T, s *Store, id core.RunID) (record map[string]json.RawMessage, checkpoint []byte) {
	t.Helper()
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket([]byte("runs")).Get(u64(uint64(id)))
		if v == nil {
			return errors.New("no runs record")
		}
		if err := json.Unmarshal(v, &record); err != nil {
			return err
		}
		b := tx.Bucket([]byte("run_checkpoints"))
		if b == nil {
			return errors.New("no run_checkpoints bucket")
		}
		checkpoint = bytes.Clone(b.Get(u64(uint64(id))))
		return nil
	})
	if err != nil {
		t.Fatalf("raw run %d: %v", id, err)
	}
	return record, checkpoint
}

// TestRunCheckpointStoredApart stores runs with checkpoints (schema version 8):
// the runs record holds no checkpoint, run_checkpoints holds its bytes, and
// every read that returns a run (Run, RunsByStatus through the index and
// through the scan, RunsBefore, Dump) returns the checkpoint as it was put.
func TestRunCheckpointStoredApart(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	waiting := json.RawMessage(`{"messages":[{"role":"user","content":"deploy <prod> & \"wait\""}]}`)
	done := json.RawMessage(`{"messages":[]}`)
	var ids [3]core.RunID
	err := s.Update(ctx, func(tx core.Tx) error {
		for i, r := range []core.Run{
			{Bot: "bot:eng", Thread: 1, Status: core.RunWaitingHuman, Checkpoint: waiting},
			{Bot: "bot:eng", Thread: 1, Status: core.RunCompleted, Checkpoint: done},
			{Bot: "bot:eng", Thread: 1, Status: core.RunQueued},
		} {
			got, err := tx.PutRun(r)
			if err != nil {
				return err
			}
			if !bytes.Equal(got.Checkpoint, r.Checkpoint) {
				t.Errorf("PutRun returned checkpoint %s, want %s", got.Checkpoint, r.Checkpoint)
			}
			ids[i] = got.ID
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.RunID]string{ids[0]: string(waiting), ids[1]: string(done), ids[2]: ""}
	for id, cp := range want {
		record, stored := rawRun(t, s, id)
		if _, ok := record["checkpoint"]; ok {
			t.Errorf("runs record of run %d holds a checkpoint: %v", id, record)
		}
		if string(stored) != cp {
			t.Errorf("run_checkpoints of run %d = %q, want %q", id, stored, cp)
		}
	}
	check := func(what string, runs ...core.Run) {
		t.Helper()
		if len(runs) == 0 {
			t.Errorf("%s: no runs", what)
		}
		for _, r := range runs {
			if string(r.Checkpoint) != want[r.ID] {
				t.Errorf("%s: run %d checkpoint = %q, want %q", what, r.ID, r.Checkpoint, want[r.ID])
			}
		}
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		for id := range want {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			check("Run", r)
		}
		for _, st := range []core.RunStatus{core.RunWaitingHuman, core.RunCompleted, core.RunQueued} {
			runs, err := tx.RunsByStatus(st)
			if err != nil {
				return err
			}
			check("RunsByStatus "+string(st), runs...)
		}
		runs, err := tx.RunsBefore(0, 0)
		if err != nil {
			return err
		}
		check("RunsBefore", runs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dumped []core.Run
	_, _, err = s.Dump(ctx, func(rec dump.Record) error {
		if r, ok := rec.Value.(core.Run); ok {
			dumped = append(dumped, r)
		}
		return nil
	})
	if err != nil || len(dumped) != len(want) {
		t.Fatalf("Dump: %d runs, %v; want %d", len(dumped), err, len(want))
	}
	check("Dump", dumped...)
}

// putRun stores r in a transaction of its own and returns it as stored.
func putRun(t *testing.T, s *Store, r core.Run) core.Run {
	t.Helper()
	err := s.Update(context.Background(), func(tx core.Tx) error {
		var err error
		r, err = tx.PutRun(r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunCheckpointCleared: putting a run without a checkpoint (a run that
// settles keeps no transcript, seed G5) deletes its run_checkpoints entry.
func TestRunCheckpointCleared(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	r := putRun(t, s, core.Run{Bot: "bot:eng", Thread: 1, Status: core.RunRunning, Checkpoint: json.RawMessage(`{"step":1}`)})
	if _, cp := rawRun(t, s, r.ID); string(cp) != `{"step":1}` {
		t.Fatalf("run_checkpoints after put = %q", cp)
	}
	r.Status, r.Checkpoint = core.RunCompleted, nil
	putRun(t, s, r)
	if _, cp := rawRun(t, s, r.ID); cp != nil {
		t.Errorf("run_checkpoints after the run settled = %q, want no entry", cp)
	}
	err := s.View(ctx, func(tx core.ReadTx) error {
		got, err := tx.Run(r.ID)
		if err == nil && got.Checkpoint != nil {
			t.Errorf("Run after the checkpoint was cleared = %q, want nil", got.Checkpoint)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutRunKeepsUnchangedCheckpoint: a PutRun that does not change the
// checkpoint (a status or usage update) writes a page set far smaller than the
// checkpoint, since the checkpoint's bytes are neither re-encoded nor re-put.
func TestPutRunKeepsUnchangedCheckpoint(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	cp := benchTranscript(64<<10, "a")
	r := putRun(t, s, core.Run{Bot: "bot:eng", Thread: 1, Status: core.RunRunning, Checkpoint: cp})
	before := pageAlloc(s)
	err := s.Update(ctx, func(tx core.Tx) error {
		got, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		got.Usage.ModelCalls++
		_, err = tx.PutRun(got)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if alloc := pageAlloc(s) - before; alloc >= int64(len(cp))/2 {
		t.Errorf("a usage update of a run with a %d-byte checkpoint allocated %d bytes of pages, want under half the checkpoint", len(cp), alloc)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		got, err := tx.Run(r.ID)
		if err == nil && (!bytes.Equal(got.Checkpoint, cp) || got.Usage.ModelCalls != 1) {
			t.Errorf("Run after the update: %d checkpoint bytes, %d model calls", len(got.Checkpoint), got.Usage.ModelCalls)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutRunRejectsInvalidCheckpoint: a checkpoint that is not JSON is refused
// before anything is written, as when it was encoded inside the record.
func TestPutRunRejectsInvalidCheckpoint(t *testing.T) {
	s := openTemp(t)
	err := s.Update(context.Background(), func(tx core.Tx) error {
		_, err := tx.PutRun(core.Run{Bot: "bot:eng", Thread: 1, Status: core.RunRunning, Checkpoint: json.RawMessage(`{"cut`)})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("PutRun with a broken checkpoint = %v, want an error naming the checkpoint", err)
	}
}

// TestVerifyRunCheckpoints: Verify reports a checkpoint whose run is gone and
// a runs record that still holds its checkpoint (the version 7 layout).
func TestVerifyRunCheckpoints(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	r := putRun(t, s, core.Run{Bot: "bot:eng", Thread: 1, Status: core.RunCompleted})
	if err := s.Verify(ctx); err != nil {
		t.Fatalf("Verify of a good file: %v", err)
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		r.Checkpoint = json.RawMessage(`{"old":true}`)
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := tx.Bucket([]byte("runs")).Put(u64(uint64(r.ID)), data); err != nil {
			return err
		}
		b := tx.Bucket([]byte("run_checkpoints"))
		if b == nil {
			return errors.New("no run_checkpoints bucket")
		}
		return b.Put(u64(99), []byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Verify(ctx)
	for _, want := range []string{"run 99", "holds its checkpoint"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify = %v, want a problem naming %q", err, want)
		}
	}
}

// pageAlloc is the bytes of pages the store's write transactions allocated.
func pageAlloc(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetPageAlloc()
}

// TestAppendRunEventUnknownRun: the existence check of AppendRunEvent (a key
// lookup) still answers an unknown run with core.ErrNotFound and writes nothing.
func TestAppendRunEventUnknownRun(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	err := s.Update(ctx, func(tx core.Tx) error {
		_, err := tx.AppendRunEvent(core.RunEvent{Run: 7, Type: "text"})
		return err
	})
	if !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), "run 7") {
		t.Errorf("AppendRunEvent of an unknown run = %v, want run 7 not found", err)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		events, err := tx.RunEventsSince(0, 0)
		if len(events) != 0 {
			t.Errorf("events after a refused append: %v", events)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
