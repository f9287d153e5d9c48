package postgres_test

import (
	"context"
	"testing"

	"openbot/core"
	"openbot/store/postgres"
)

// TestFollowersSkipNothing: with IDs from sequences, a transaction that drew a
// lower message ID can commit after one that drew a higher ID. A reader
// following IDs in order (MessagesSince, Heads) must not pass the lower ID
// while it may still commit: it sees the higher message only after the lower
// one's transaction ended.
func TestFollowersSkipNothing(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := t.Context()
	var th, th2 core.Thread
	if err := s.Update(ctx, func(tx core.Tx) error {
		var err error
		th, err = tx.PutThread(core.Thread{Key: "a"})
		if err != nil {
			return err
		}
		other, err := tx.PutThread(core.Thread{Key: "b"})
		th2 = other
		return err
	}); err != nil {
		t.Fatal(err)
	}
	drew, release := make(chan core.MessageID), make(chan struct{})
	slow := make(chan error, 1)
	go func() {
		slow <- s.Update(context.Background(), func(tx core.Tx) error {
			m, err := tx.PutMessage(core.Message{Thread: th.ID, Text: "slow"})
			if err != nil {
				return err
			}
			select {
			case drew <- m.ID:
			default: // a run again after a conflict: nobody waits
			}
			<-release
			return nil
		})
	}()
	low := <-drew
	var high core.Message
	if err := s.Update(ctx, func(tx core.Tx) error {
		var err error
		high, err = tx.PutMessage(core.Message{Thread: th2.ID, Text: "fast"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if high.ID <= low {
		t.Fatalf("fast message ID %d not above the slow one's %d", high.ID, low)
	}
	follow := func() ([]core.Message, core.LogHeads) {
		var ms []core.Message
		var h core.LogHeads
		if err := s.View(ctx, func(tx core.ReadTx) error {
			var err error
			if ms, err = tx.MessagesSince(0, 0); err != nil {
				return err
			}
			h, err = tx.Heads()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ms, h
	}
	if ms, h := follow(); len(ms) != 0 || h.Message != 0 {
		t.Errorf("while message %d may still commit: MessagesSince = %d messages, Heads.Message = %d; want none, 0", low, len(ms), h.Message)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	ms, h := follow()
	if len(ms) != 2 || ms[0].ID != low || ms[1].ID != high.ID || h.Message != high.ID {
		t.Errorf("after it committed: MessagesSince = %+v, Heads.Message = %d; want %d then %d", ms, h.Message, low, high.ID)
	}
}
