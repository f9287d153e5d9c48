package bolt

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// Pruning run events deletes their run_event_log entries in the same
// transaction: after a pass, every entry names a stored event, Verify is clean,
// and the live event stream replays only the events that remain. Events of old
// runs appended after an event of a run that must stay (a run waiting for a
// person, interleaved in the log) go too.
func TestPruneRunEventsDeletesLogEntries(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	old := pruneNow.Add(-500 * time.Hour)
	err := s.Update(ctx, func(tx core.Tx) error {
		waiting, err := tx.PutRun(core.Run{Thread: 1, Bot: "bot:a", Status: core.RunWaitingHuman, Created: old})
		if err != nil {
			return err
		}
		done, err := tx.PutRun(core.Run{Thread: 2, Bot: "bot:a", Status: core.RunCompleted, Created: old, Ended: old})
		if err != nil {
			return err
		}
		recent, err := tx.PutRun(core.Run{Thread: 3, Bot: "bot:a", Status: core.RunCompleted, Created: pruneNow, Ended: pruneNow})
		if err != nil {
			return err
		}
		// Interleaved in the log: waiting, done, waiting, done, recent.
		for _, r := range []core.RunID{waiting.ID, done.ID, waiting.ID, done.ID, recent.ID} {
			if _, err := tx.AppendRunEvent(core.RunEvent{Run: r, Type: "status", At: old}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := core.NewPruner(core.PrunerOptions{Store: s, Clock: fixedClock{pruneNow}, Batch: 1,
		Retention: core.Retention{RunEvents: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n[core.PruneRunEvents] != 2 {
		t.Errorf("pruned %d run events, want 2", n[core.PruneRunEvents])
	}
	checkIndexes(t, s)
	var entries int
	_ = s.db.View(func(tx *bbolt.Tx) error {
		entries = tx.Bucket(bktRunEventLog).Stats().KeyN
		return nil
	})
	if entries != 3 {
		t.Errorf("run_event_log has %d entries after the prune, want 3 (the kept events)", entries)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		evs, err := tx.RunEventsSince(0, 0)
		if err != nil {
			return err
		}
		var pos []uint64
		for _, e := range evs {
			pos = append(pos, e.Pos)
		}
		if len(pos) != 3 || pos[0] != 1 || pos[1] != 3 || pos[2] != 5 {
			t.Errorf("replayed positions %v, want [1 3 5]", pos)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An entry whose event is already gone (left by an earlier version of the
// pruner) is reported by Verify and removed by the next pass.
func TestPruneRemovesOrphanLogEntries(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	old := pruneNow.Add(-500 * time.Hour)
	err := s.Update(ctx, func(tx core.Tx) error {
		r, err := tx.PutRun(core.Run{Thread: 1, Bot: "bot:a", Status: core.RunWaitingHuman, Created: old})
		if err != nil {
			return err
		}
		for range 2 {
			if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "status", At: old}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bktRunEvents).Delete(pairKey(1, 1))
	})
	if err := s.Verify(ctx); err == nil {
		t.Fatal("Verify: an entry naming a gone event was not reported")
	}
	p, err := core.NewPruner(core.PrunerOptions{Store: s, Clock: fixedClock{pruneNow}, Batch: 10,
		Retention: core.Retention{RunEvents: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, s)
}
