package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"openbot/core"
)

// Under concurrent Batch and Update writers, some inserting reserved IDs, some
// failing inside a group (which rolls it back and runs the group again), a
// reader that follows messages by ID (MessagesSince, the console's live
// stream) never has a message committed behind its cursor, and no ID is
// committed twice.
func TestReservedIDsKeepCommitOrderUnderLoad(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "openbot.db"), Options{NoSync: true, MaxBatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th := newThread(t, s)
	ctx := context.Background()
	errBoom := errors.New("boom")

	var (
		mu        sync.Mutex
		committed = map[core.MessageID]int{}
	)
	note := func(id core.MessageID) {
		mu.Lock()
		committed[id]++
		mu.Unlock()
	}
	stop := make(chan struct{})
	var seen []core.MessageID
	readerDone := make(chan error, 1)
	go func() { // the live stream
		var cursor core.MessageID
		for {
			select {
			case <-stop:
			default:
			}
			var ms []core.Message
			err := s.View(ctx, func(tx core.ReadTx) error {
				var err error
				ms, err = tx.(interface {
					MessagesSince(core.MessageID, int) ([]core.Message, error)
				}).MessagesSince(cursor, 0)
				return err
			})
			if err != nil {
				readerDone <- err
				return
			}
			for _, m := range ms {
				seen = append(seen, m.ID)
				cursor = m.ID
			}
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
		}
	}()

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(g)))
			for range 60 {
				var id core.MessageID
				var reserved uint64
				if rnd.Intn(2) == 0 {
					r, err := s.ReserveID(core.IDMessage)
					if err != nil {
						t.Error(err)
						return
					}
					reserved, id = r, core.MessageID(r)
				}
				fail := rnd.Intn(5) == 0 // fails in its group; run again alone, it commits
				tries := 0
				var got core.MessageID
				fn := func(tx core.Tx) error {
					tries++
					m, err := tx.PutMessage(core.Message{ID: id, Thread: th, Sender: "u:1", Text: fmt.Sprint(g)})
					if err != nil {
						return err
					}
					got = m.ID
					if fail && tries == 1 {
						return errBoom
					}
					return nil
				}
				var err error
				if rnd.Intn(4) == 0 {
					if err = s.Update(ctx, fn); errors.Is(err, errBoom) {
						err = s.Update(ctx, fn)
					}
				} else {
					err = s.Batch(ctx, fn)
				}
				if reserved != 0 {
					s.ReleaseIDs(core.IDMessage, reserved)
				}
				switch {
				case err == nil:
					note(got)
				default:
					t.Errorf("write: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	// A last read catches what the reader's last pass missed.
	var all []core.Message
	if err := s.View(ctx, func(tx core.ReadTx) error {
		var err error
		all, err = tx.Messages(th, 0, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for id, n := range committed {
		if n != 1 {
			t.Errorf("message %d committed %d times", id, n)
		}
	}
	if len(all) != len(committed) {
		t.Errorf("%d messages stored, %d writes committed", len(all), len(committed))
	}
	inSeen := map[core.MessageID]bool{}
	for i, id := range seen {
		if i > 0 && id <= seen[i-1] {
			t.Fatalf("stream went back: %d after %d", id, seen[i-1])
		}
		inSeen[id] = true
	}
	last := core.MessageID(0)
	if len(seen) > 0 {
		last = seen[len(seen)-1]
	}
	for _, m := range all {
		if m.ID <= last && !inSeen[m.ID] {
			t.Errorf("message %d was committed behind the stream's cursor (%d)", m.ID, last)
		}
	}
}
