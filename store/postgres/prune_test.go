package postgres_test

import (
	"testing"
	"time"

	"openbot/core"
	"openbot/store/postgres"
)

// TestPrune deletes what retention allows of each kind, in limit-sized steps,
// and keeps pending outbox entries, unfinished runs' events and busy threads.
func TestPrune(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cut := old.Add(time.Hour)
	fresh := cut.Add(time.Hour)
	var idle, busy core.ThreadID
	err := s.Update(t.Context(), func(tx core.Tx) error {
		ti, _ := tx.PutThread(core.Thread{Key: "idle"})
		tb, _ := tx.PutThread(core.Thread{Key: "busy"})
		idle, busy = ti.ID, tb.ID
		for _, th := range []core.ThreadID{idle, busy} {
			for range 2 {
				m, err := tx.PutMessage(core.Message{Thread: th, Text: "x", Created: old})
				if err != nil {
					return err
				}
				if err := tx.MarkSeen("k"+m.Text+string(rune('0'+m.ID)), m.ID); err != nil {
					return err
				}
			}
		}
		if _, err := tx.PutItem(core.InboxItem{Actor: "bot:eng", Thread: busy, Kind: core.ItemMessage, Status: core.ItemQueued}); err != nil {
			return err
		}
		for range 3 {
			if err := tx.AppendActivity(core.Activity{Event: "old", At: old}); err != nil {
				return err
			}
		}
		if err := tx.AppendActivity(core.Activity{Event: "new", At: fresh}); err != nil {
			return err
		}
		for _, st := range []core.OutboxStatus{core.OutboxDelivered, core.OutboxPending} {
			if _, err := tx.PutOutbox(core.OutboxEntry{Thread: idle, Status: st, Created: old}); err != nil {
				return err
			}
		}
		done, _ := tx.PutRun(core.Run{Bot: "bot:eng", Thread: idle, Status: core.RunCompleted, Created: old, Ended: old})
		live, _ := tx.PutRun(core.Run{Bot: "bot:eng", Thread: idle, Status: core.RunWaitingHuman, Created: old})
		for _, r := range []core.Run{done, live} {
			if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	prune := func(kind core.PruneKind, limit int) (int, bool) {
		n, more, err := s.Prune(t.Context(), kind, cut, limit)
		if err != nil {
			t.Fatalf("Prune %s: %v", kind, err)
		}
		return n, more
	}
	if n, more := prune(core.PruneActivity, 2); n != 2 || !more {
		t.Errorf("activity step 1 = %d, %v; want 2, true", n, more)
	}
	if n, _ := prune(core.PruneActivity, 2); n != 1 {
		t.Errorf("activity step 2 = %d, want 1", n)
	}
	if n, _ := prune(core.PruneOutbox, 10); n != 1 {
		t.Errorf("outbox deleted %d, want 1 (the pending one stays)", n)
	}
	if n, _ := prune(core.PruneRunEvents, 10); n != 1 {
		t.Errorf("run events deleted %d, want 1 (the paused run's stays)", n)
	}
	// The idle thread still has a waiting run: nothing idle yet. Finish it.
	if n, _ := prune(core.PruneIdleMessages, 10); n != 0 {
		t.Errorf("idle messages deleted %d while a run waits, want 0", n)
	}
	_ = s.Update(t.Context(), func(tx core.Tx) error {
		r, _ := tx.Run(2)
		r.Status = core.RunCancelled
		_, err := tx.PutRun(r)
		return err
	})
	if n, _ := prune(core.PruneIdleMessages, 10); n != 2 {
		t.Errorf("idle messages deleted %d, want the idle thread's 2", n)
	}
	if n, _ := prune(core.PruneDedup, 10); n != 4 {
		t.Errorf("dedup keys deleted %d, want 4 (all messages old or gone)", n)
	}
	_ = s.View(t.Context(), func(tx core.ReadTx) error {
		if n, _ := tx.CountMessages(busy); n != 2 {
			t.Errorf("busy thread kept %d messages, want 2", n)
		}
		if a, _ := tx.Activities(0, 0); len(a) != 1 || a[0].Event != "new" {
			t.Errorf("activities left %+v", a)
		}
		return nil
	})
	if _, _, err := s.Prune(t.Context(), "nope", cut, 1); err == nil {
		t.Error("unknown kind accepted")
	}
}
