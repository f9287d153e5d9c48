package bolt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"openbot/core"
)

type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }

var pruneNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// seedAged writes, for each age, a thread with one message (and its dedup key),
// a finished run with two events, an activity line and a delivered outbox
// entry, all stamped now-age; plus one old run still waiting for a person and
// one old pending outbox entry, which must survive any retention.
func seedAged(t *testing.T, s *Store, ages ...time.Duration) (waiting core.RunID, pending core.OutboxID) {
	t.Helper()
	err := s.Update(context.Background(), func(tx core.Tx) error {
		for i, age := range ages {
			at := pruneNow.Add(-age)
			th, err := tx.PutThread(core.Thread{Title: fmt.Sprint(i), Created: at})
			if err != nil {
				return err
			}
			m, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "telegram:1", Text: "hi", Created: at})
			if err != nil {
				return err
			}
			if err := tx.MarkSeen(fmt.Sprintf("telegram:1:%d", i), m.ID); err != nil {
				return err
			}
			r, err := tx.PutRun(core.Run{Thread: th.ID, Bot: "bot:a", Status: core.RunCompleted, Created: at, Ended: at})
			if err != nil {
				return err
			}
			for range 2 {
				if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, At: at}); err != nil {
					return err
				}
			}
			if err := tx.AppendActivity(core.Activity{Event: "x", Summary: "s", At: at}); err != nil {
				return err
			}
			if _, err := tx.PutOutbox(core.OutboxEntry{Thread: th.ID, Message: m.ID, Status: core.OutboxDelivered, Created: at}); err != nil {
				return err
			}
		}
		old := pruneNow.Add(-1000 * time.Hour)
		r, err := tx.PutRun(core.Run{Thread: 999, Bot: "bot:a", Status: core.RunWaitingHuman, Created: old})
		if err != nil {
			return err
		}
		waiting = r.ID
		if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, At: old}); err != nil {
			return err
		}
		o, err := tx.PutOutbox(core.OutboxEntry{Thread: 1, Status: core.OutboxPending, Created: old})
		pending = o.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return waiting, pending
}

// With a short retention, old run events, activity, finished outbox entries and
// dedup keys go; current ones stay, and so do the events of a run still waiting
// for a person and a pending outbox entry, however old.
func TestPruneOldGoesCurrentStays(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	waiting, pending := seedAged(t, s, 500*time.Hour, 400*time.Hour, time.Hour, time.Minute)
	p, err := core.NewPruner(core.PrunerOptions{Store: s, Clock: fixedClock{pruneNow}, Batch: 1,
		Retention: core.Retention{RunEvents: 48 * time.Hour, Activity: 48 * time.Hour, Outbox: 48 * time.Hour, DedupKeys: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.PruneKind]int{core.PruneRunEvents: 4, core.PruneActivity: 2, core.PruneOutbox: 2, core.PruneDedup: 2}
	for k, v := range want {
		if n[k] != v {
			t.Errorf("pruned %s = %d, want %d (all: %v)", k, n[k], v, n)
		}
	}
	if n[core.PruneIdleMessages] != 0 {
		t.Errorf("idle thread messages pruned although off: %d", n[core.PruneIdleMessages])
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		for id := core.RunID(1); id <= 4; id++ {
			ev, err := tx.RunEvents(id)
			if err != nil {
				return err
			}
			if wantN := map[bool]int{true: 0, false: 2}[id <= 2]; len(ev) != wantN {
				t.Errorf("run %d has %d events, want %d", id, len(ev), wantN)
			}
		}
		if ev, _ := tx.RunEvents(waiting); len(ev) != 1 {
			t.Errorf("waiting run lost its events")
		}
		acts, _ := tx.Activities(0, 0)
		if len(acts) != 2 || !acts[0].At.Equal(pruneNow.Add(-time.Hour)) {
			t.Errorf("activities left: %+v", acts)
		}
		if _, err := tx.Outbox(pending); err != nil {
			t.Errorf("pending outbox entry: %v", err)
		}
		if _, err := tx.Outbox(1); err == nil {
			t.Errorf("old delivered outbox entry kept")
		}
		if _, err := tx.Outbox(3); err != nil {
			t.Errorf("current outbox entry: %v", err)
		}
		if _, err := tx.Seen("telegram:1:0"); err == nil {
			t.Errorf("old dedup key kept")
		}
		if _, err := tx.Seen("telegram:1:3"); err != nil {
			t.Errorf("current dedup key: %v", err)
		}
		// Messages stay: idle thread pruning is off.
		if _, err := tx.Message(1); err != nil {
			t.Errorf("message of an old thread: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, s)
	// A second pass finds nothing more.
	if n, _ := p.Pass(ctx); n[core.PruneRunEvents]+n[core.PruneActivity]+n[core.PruneOutbox]+n[core.PruneDedup] != 0 {
		t.Errorf("second pass pruned %v", n)
	}
}

// Idle thread pruning (off by default) deletes the messages of threads idle
// longer than its retention, and only those.
func TestPruneIdleThreadMessages(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	seedAged(t, s, 500*time.Hour, time.Hour)
	p, err := core.NewPruner(core.PrunerOptions{Store: s, Clock: fixedClock{pruneNow}, Batch: 1,
		Retention: core.Retention{IdleThreadMessages: 100 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n[core.PruneIdleMessages] != 1 {
		t.Errorf("idle messages pruned = %d, want 1", n[core.PruneIdleMessages])
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		if _, err := tx.Message(1); err == nil {
			t.Error("message of the idle thread kept")
		}
		if _, err := tx.Message(2); err != nil {
			t.Errorf("message of the current thread: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, s)
}

// Dedup keys are never kept shorter than the platforms' redelivery windows.
func TestPrunerRefusesShortDedup(t *testing.T) {
	_, err := core.NewPruner(core.PrunerOptions{Store: openTemp(t), Retention: core.Retention{DedupKeys: time.Hour}})
	if err == nil {
		t.Fatal("dedup retention of 1h accepted")
	}
}
