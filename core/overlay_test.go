package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"openbot/core"
	"openbot/store/bolt"
)

// The overlay a speculative ingest runs on answers the reads the ingest and the
// pick make as the store does after the same writes: the same operations run
// on the overlay and on a real write transaction (inserting with the same
// reserved IDs) read the same things, and the overlay writes nothing.
func TestOverlayReadsAsTheStoreDoes(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var (
		thread, other core.ThreadID
		first         core.ItemID
		waiting       core.RunID
	)
	// The stored state: a thread with two messages and a queued item, another
	// thread with a queued item, a run waiting for a person.
	if err := st.Update(ctx, func(tx core.Tx) error {
		for i, key := range []string{"k1", "k2"} {
			th, err := tx.PutThread(core.Thread{Key: key, Created: at})
			if err != nil {
				return err
			}
			if err := tx.BindThreadKey(key, th.ID); err != nil {
				return err
			}
			if i == 0 {
				thread = th.ID
			} else {
				other = th.ID
			}
		}
		for _, text := range []string{"one", "two"} {
			m, err := tx.PutMessage(core.Message{Thread: thread, Sender: "u:1", Text: text, Created: at})
			if err != nil {
				return err
			}
			if err := tx.MarkSeen("seen:"+text, m.ID); err != nil {
				return err
			}
		}
		for _, th := range []core.ThreadID{thread, other} {
			it, err := tx.PutItem(core.InboxItem{Actor: "bot:a", Thread: th, Kind: core.ItemMessage, Status: core.ItemQueued, Created: at})
			if err != nil {
				return err
			}
			if first == 0 {
				first = it.ID
			}
		}
		r, err := tx.PutRun(core.Run{Bot: "bot:a", Thread: other, Status: core.RunWaitingHuman, Created: at})
		waiting = r.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}

	var reads [2][]string // [0]: the overlay's, [1]: the store's
	runs := 0
	ops := func(tx core.Tx) error {
		out := &reads[min(runs, 1)]
		runs++
		read := func(what string, r result) {
			v, err := r.v, r.err
			if err != nil {
				v = "error: " + err.Error()
				if errors.Is(err, core.ErrNotFound) {
					v = "not found"
				}
			}
			b, _ := json.Marshal(v)
			*out = append(*out, what+" "+string(b))
		}
		th, err := tx.PutThread(core.Thread{Key: "new", Title: "a new thread", Created: at})
		if err != nil {
			return err
		}
		if err := tx.BindThreadKey("new", th.ID); err != nil {
			return err
		}
		m, err := tx.PutMessage(core.Message{Thread: thread, Sender: "u:2", Text: "three", Created: at})
		if err != nil {
			return err
		}
		if err := tx.MarkSeen("seen:three", m.ID); err != nil {
			return err
		}
		if err := tx.PutActor(core.Actor{ID: "u:2", Kind: core.ActorHuman, Name: "Two", Created: at}); err != nil {
			return err
		}
		it, err := tx.PutItem(core.InboxItem{Actor: "bot:a", Thread: thread, Kind: core.ItemMessage, Message: m.ID, Status: core.ItemQueued, Created: at})
		if err != nil {
			return err
		}
		read("next queued", maybe(tx.NextQueued("bot:a", func(core.InboxItem) bool { return false })))
		read("next queued, not in thread", maybe(tx.NextQueued("bot:a", func(i core.InboxItem) bool { return i.Thread == thread })))
		read("queued in thread", maybe(tx.QueuedInThread("bot:a", thread)))
		// The stored item of the thread is taken, the new one too: the other thread's is next.
		old, err := tx.Item(first)
		if err != nil {
			return err
		}
		old.Status = core.ItemProcessing
		if _, err := tx.PutItem(old); err != nil {
			return err
		}
		it.Status = core.ItemProcessing
		if _, err := tx.PutItem(it); err != nil {
			return err
		}
		read("next queued after the pick", maybe(tx.NextQueued("bot:a", func(core.InboxItem) bool { return false })))
		read("queued in thread after the pick", maybe(tx.QueuedInThread("bot:a", thread)))
		r, err := tx.PutRun(core.Run{Bot: "bot:a", Thread: thread, Status: core.RunRunning, Created: at, Items: []core.ItemID{it.ID}})
		if err != nil {
			return err
		}
		w, err := tx.Run(waiting)
		if err != nil {
			return err
		}
		w.Status = core.RunCompleted
		if _, err := tx.PutRun(w); err != nil {
			return err
		}
		read("running", maybe(tx.RunsByStatus(core.RunRunning)))
		read("waiting", maybe(tx.RunsByStatus(core.RunWaitingHuman)))
		read("run", maybe(tx.Run(r.ID)))
		read("newest two", maybe(tx.MessagesBefore(thread, 0, 2)))
		read("before the new one", maybe(tx.MessagesBefore(thread, m.ID, 5)))
		read("count", maybe(tx.CountMessages(thread)))
		read("message", maybe(tx.Message(m.ID)))
		read("thread", maybe(tx.Thread(th.ID)))
		read("thread by key", maybe(tx.ThreadByKey("new")))
		read("seen", maybe(tx.Seen("seen:three")))
		read("actor", maybe(tx.Actor("u:2")))
		read("item", maybe(tx.Item(it.ID)))
		return nil
	}
	oerr, serr := core.OverlayThenStore(ctx, st, ops)
	if oerr != nil || serr != nil {
		t.Fatalf("overlay: %v; store: %v", oerr, serr)
	}
	if len(reads[0]) == 0 || !slices.Equal(reads[0], reads[1]) {
		for i := range max(len(reads[0]), len(reads[1])) {
			var o, s string
			if i < len(reads[0]) {
				o = reads[0][i]
			}
			if i < len(reads[1]) {
				s = reads[1][i]
			}
			if o != s {
				t.Errorf("overlay: %s\n      store:   %s", o, s)
			}
		}
		t.FailNow()
	}

	// The overlay wrote nothing, and its reservations ended with it.
	if err := st.View(ctx, func(tx core.ReadTx) error {
		n, err := tx.CountMessages(thread)
		if err != nil || n != 2 {
			t.Errorf("after the overlay the thread holds %d messages (%v), want 2", n, err)
		}
		if _, err := tx.ThreadByKey("new"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("the overlay's thread key was stored: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A write the ingest does not make is refused, and the speculation gives up.
	oerr, _ = core.OverlayThenStore(ctx, st, func(tx core.Tx) error {
		_, err := tx.PutQuestion(core.Question{Thread: thread})
		return err
	})
	if oerr == nil {
		t.Fatal("the overlay took a question")
	}
}

// result is a read's outcome, one value for the comparison.
type result struct {
	v   any
	err error
}

func maybe[T any](v T, err error) result { return result{v, err} }
