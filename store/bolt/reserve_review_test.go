package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"openbot/core"
)

// Speculations reserve IDs of every kind inside a read transaction while
// writers grow the file (bbolt remaps it, waiting for every reader), insert
// some of them with Batch or Update (failing in their group now and then, or
// rolling back), and release the rest, the newest of which are handed out
// again. Meanwhile readers follow messages from Heads with MessagesSince.
// Nothing deadlocks, no ID of any kind is committed twice, and no message is
// committed at or below a Heads or cursor a reader has passed.
func TestReservedIDsUnderRemapAndRelease(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "openbot.db"), Options{NoSync: true, MaxBatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th := newThread(t, s)
	ctx := context.Background()
	errBoom := errors.New("boom")
	big := strings.Repeat("x", 24<<10) // grows the file: remaps under readers

	var (
		mu        sync.Mutex
		committed = map[core.IDKind]map[uint64]int{}
	)
	note := func(k core.IDKind, id uint64) {
		mu.Lock()
		if committed[k] == nil {
			committed[k] = map[uint64]int{}
		}
		committed[k][id]++
		mu.Unlock()
	}
	type passed struct {
		head core.MessageID
		seen map[core.MessageID]bool
	}
	var (
		pmu   sync.Mutex
		marks []passed
	)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			last := core.MessageID(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				var p passed
				if err := s.View(ctx, func(tx core.ReadTx) error {
					h, err := tx.Heads()
					if err != nil {
						return err
					}
					ms, err := tx.MessagesSince(0, 0)
					if err != nil {
						return err
					}
					p = passed{head: h.Message, seen: map[core.MessageID]bool{}}
					for _, m := range ms {
						p.seen[m.ID] = true
						p.head = max(p.head, m.ID)
					}
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				if p.head != last {
					last = p.head
					pmu.Lock()
					marks = append(marks, p)
					pmu.Unlock()
				}
			}
		}()
	}

	kinds := []core.IDKind{core.IDThread, core.IDMessage, core.IDItem, core.IDRun}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(g) + 100))
			for range 40 {
				// The speculation: reservations taken inside a read transaction.
				res := map[core.IDKind][]uint64{}
				if err := s.View(ctx, func(core.ReadTx) error {
					for _, k := range kinds {
						for range 1 + rnd.Intn(2) {
							id, err := s.ReserveID(k)
							if err != nil {
								return err
							}
							res[k] = append(res[k], id)
						}
					}
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				use := rnd.Intn(3) != 0 // else the speculation missed: all released
				fail := rnd.Intn(4) == 0
				grow := rnd.Intn(3) == 0
				tries := 0
				var got map[core.IDKind][]uint64
				fn := func(tx core.Tx) error {
					tries++
					got = map[core.IDKind][]uint64{}
					pick := func(k core.IDKind) uint64 {
						if use && len(res[k]) > 0 {
							return res[k][0]
						}
						return 0
					}
					nt, err := tx.PutThread(core.Thread{ID: core.ThreadID(pick(core.IDThread)), Key: fmt.Sprint("t", g)})
					if err != nil {
						return err
					}
					m, err := tx.PutMessage(core.Message{ID: core.MessageID(pick(core.IDMessage)), Thread: th, Sender: "u:1", Text: "s"})
					if err != nil {
						return err
					}
					m2, err := tx.PutMessage(core.Message{Thread: th, Sender: "u:1", Text: "n"})
					if err != nil {
						return err
					}
					it, err := tx.PutItem(core.InboxItem{ID: core.ItemID(pick(core.IDItem)), Actor: "bot:a", Thread: nt.ID, Kind: core.ItemMessage, Message: m.ID, Status: core.ItemQueued})
					if err != nil {
						return err
					}
					run, err := tx.PutRun(core.Run{ID: core.RunID(pick(core.IDRun)), Bot: "bot:a", Thread: nt.ID, Status: core.RunRunning})
					if err != nil {
						return err
					}
					if grow {
						if err := tx.AppendActivity(core.Activity{Event: "grow", Summary: big}); err != nil {
							return err
						}
					}
					got[core.IDThread] = []uint64{uint64(nt.ID)}
					got[core.IDMessage] = []uint64{uint64(m.ID), uint64(m2.ID)}
					got[core.IDItem] = []uint64{uint64(it.ID)}
					got[core.IDRun] = []uint64{uint64(run.ID)}
					if fail && tries == 1 {
						return errBoom
					}
					return nil
				}
				var err error
				if rnd.Intn(3) == 0 {
					if err = s.Update(ctx, fn); errors.Is(err, errBoom) {
						err = s.Update(ctx, fn)
					}
				} else {
					err = s.Batch(ctx, fn)
				}
				for k, ids := range res {
					s.ReleaseIDs(k, ids...)
				}
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				for k, ids := range got {
					for _, id := range ids {
						note(k, id)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	for k, m := range committed {
		for id, n := range m {
			if n != 1 {
				t.Errorf("kind %d: id %d committed %d times", k, id, n)
			}
		}
	}
	var all []core.Message
	if err := s.View(ctx, func(tx core.ReadTx) error {
		var err error
		all, err = tx.Messages(th, 0, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) != len(committed[core.IDMessage]) {
		t.Errorf("%d messages stored, %d committed", len(all), len(committed[core.IDMessage]))
	}
	missed := 0
	for _, p := range marks {
		for _, m := range all {
			if m.ID <= p.head && !p.seen[m.ID] && missed < 10 {
				missed++
				t.Errorf("message %d committed behind a reader that had passed %d", m.ID, p.head)
			}
		}
	}
	checkIndexes(t, s)
}
