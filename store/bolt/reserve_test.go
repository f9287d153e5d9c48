package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"openbot/core"
)

// putMessage inserts a message (id 0: assigned) into thread in a transaction of its own.
func putMessage(t *testing.T, s *Store, thread core.ThreadID, id core.MessageID) (core.Message, error) {
	t.Helper()
	var m core.Message
	err := s.Update(context.Background(), func(tx core.Tx) error {
		var err error
		m, err = tx.PutMessage(core.Message{ID: id, Thread: thread, Sender: "u:1", Text: "hi"})
		return err
	})
	return m, err
}

func newThread(t *testing.T, s *Store) core.ThreadID {
	t.Helper()
	var th core.Thread
	if err := s.Update(context.Background(), func(tx core.Tx) error {
		var err error
		th, err = tx.PutThread(core.Thread{Key: "k"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return th.ID
}

func reserve(t *testing.T, s *Store, kind core.IDKind) uint64 {
	t.Helper()
	id, err := s.ReserveID(kind)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestReservedIDs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "openbot.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	th := newThread(t, s)

	// A reserved ID is inserted; IDs assigned later are above it.
	r := reserve(t, s, core.IDMessage)
	if m, err := putMessage(t, s, th, core.MessageID(r)); err != nil || m.ID != core.MessageID(r) {
		t.Fatalf("insert reserved %d: %+v, %v", r, m, err)
	}
	s.ReleaseIDs(core.IDMessage, r)
	next, err := putMessage(t, s, th, 0)
	if err != nil || uint64(next.ID) != r+1 {
		t.Fatalf("next assigned id = %d, %v; want %d", next.ID, err, r+1)
	}

	// An ID that is neither stored nor reserved is still not found; a released
	// reservation is no longer one.
	if _, err := putMessage(t, s, th, next.ID+100); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("unreserved id: %v, want ErrNotFound", err)
	}
	gone := reserve(t, s, core.IDMessage)
	s.ReleaseIDs(core.IDMessage, gone)
	if _, err := putMessage(t, s, th, core.MessageID(gone)); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("released id: %v, want ErrNotFound", err)
	}
	// What a rolled-back transaction assigned is handed out again, as bbolt's
	// own sequences would be.
	var lost core.MessageID
	if err := s.Update(ctx, func(tx core.Tx) error {
		m, err := tx.PutMessage(core.Message{Thread: th, Sender: "u:1"})
		lost = m.ID
		return errors.Join(err, errors.New("roll back"))
	}); err == nil {
		t.Fatal("the transaction committed")
	}
	if m, err := putMessage(t, s, th, 0); err != nil || m.ID != lost {
		t.Fatalf("after a rollback that assigned %d the next id is %d (%v), want it again", lost, m.ID, err)
	} else {
		next = m
	}
	gone = reserve(t, s, core.IDMessage)
	s.ReleaseIDs(core.IDMessage, gone)
	// Released unused while the newest, an ID is handed out again: no gap.
	if m, err := putMessage(t, s, th, 0); err != nil || uint64(m.ID) != gone {
		t.Fatalf("after releasing %d the next id is %d (%v), want it again", gone, m.ID, err)
	}
	next = core.Message{ID: core.MessageID(gone)}

	// A reserved ID may be committed after higher IDs. Until it is, the
	// readers that use message IDs as a cursor stop below it.
	r = reserve(t, s, core.IDMessage)
	later, err := putMessage(t, s, th, 0)
	if err != nil {
		t.Fatal(err)
	}
	cursor := func() (since []core.MessageID, head core.MessageID) {
		t.Helper()
		if err := s.View(ctx, func(tx core.ReadTx) error {
			ms, err := tx.MessagesSince(next.ID, 0)
			for _, m := range ms {
				since = append(since, m.ID)
			}
			h, herr := tx.Heads()
			head = h.Message
			return errors.Join(err, herr)
		}); err != nil {
			t.Fatal(err)
		}
		return since, head
	}
	if since, head := cursor(); len(since) != 0 || head != core.MessageID(r-1) {
		t.Fatalf("while %d is reserved: since %v, head %d; want nothing after %d, head %d", r, since, head, next.ID, r-1)
	}
	// The transaction that inserts it may roll back: it stays reserved.
	boom := errors.New("roll back")
	if err := s.Update(ctx, func(tx core.Tx) error {
		if _, err := tx.PutMessage(core.Message{ID: core.MessageID(r), Thread: th, Sender: "u:1"}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if since, _ := cursor(); len(since) != 0 {
		t.Fatalf("after a rolled-back insert of %d: since %v", r, since)
	}
	if _, err := putMessage(t, s, th, core.MessageID(r)); err != nil {
		t.Fatalf("insert after a later commit: %v", err)
	}
	if since, head := cursor(); !slices.Equal(since, []core.MessageID{core.MessageID(r), later.ID}) || head != later.ID {
		t.Fatalf("once %d is committed: since %v, head %d; want [%d %d], head %d", r, since, head, r, later.ID, later.ID)
	}
	s.ReleaseIDs(core.IDMessage, r)
	// Released unused, it holds nothing back.
	gone = reserve(t, s, core.IDMessage)
	last0, err := putMessage(t, s, th, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.ReleaseIDs(core.IDMessage, gone)
	if since, head := cursor(); len(since) != 3 || head != last0.ID {
		t.Fatalf("after a release: since %v, head %d; want 3 messages, head %d", since, head, last0.ID)
	}

	// Each kind: threads, items and runs insert too.
	rt, ri, rr := reserve(t, s, core.IDThread), reserve(t, s, core.IDItem), reserve(t, s, core.IDRun)
	if err := s.Update(ctx, func(tx core.Tx) error {
		tt, err := tx.PutThread(core.Thread{ID: core.ThreadID(rt)})
		if err != nil || uint64(tt.ID) != rt {
			return errors.Join(err, errors.New("thread id"))
		}
		if _, err := tx.PutItem(core.InboxItem{ID: core.ItemID(ri), Actor: "bot:a", Thread: tt.ID, Kind: core.ItemMessage, Status: core.ItemQueued}); err != nil {
			return err
		}
		_, err = tx.PutRun(core.Run{ID: core.RunID(rr), Bot: "bot:a", Thread: tt.ID, Status: core.RunRunning})
		return err
	}); err != nil {
		t.Fatalf("thread, item and run: %v", err)
	}
	checkIndexes(t, s)
	last, err := putMessage(t, s, th, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The counters survive a restart: nothing is assigned twice.
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := putMessage(t, s, th, 0)
	if err != nil || m.ID != last.ID+1 {
		t.Fatalf("after reopen: %d, %v; want %d", m.ID, err, last.ID+1)
	}
	if id := reserve(t, s, core.IDThread); id <= rt {
		t.Fatalf("thread reserved after reopen = %d, want above %d", id, rt)
	}
	if _, err := s.ReserveID(core.IDKind(99)); err == nil {
		t.Fatal("ReserveID of an unknown kind succeeded")
	}
}
