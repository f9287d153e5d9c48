package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"openbot/core"
)

var allItemStatuses = []core.ItemStatus{core.ItemQueued, core.ItemProcessing, core.ItemDone, core.ItemCancelled, core.ItemFailed}

// checkItems compares every item query with a model of the stored items: Item,
// NextQueued, QueuedInThread, ItemsByStatus and CountQueued must all agree with it.
func checkItems(t *testing.T, s core.Store, model map[core.ItemID]core.InboxItem, actors []core.ActorID, threads []core.ThreadID) {
	t.Helper()
	sorted := slices.Sorted(func(yield func(core.ItemID) bool) {
		for id := range model {
			if !yield(id) {
				return
			}
		}
	})
	view(t, s, func(tx core.ReadTx) error {
		queued := 0
		for _, id := range sorted {
			wantEqual(t, fmt.Sprintf("Item(%d)", id), get(tx.Item(id)).must(t), model[id])
			if model[id].Status == core.ItemQueued {
				queued++
			}
		}
		wantEqual(t, "CountQueued", get(tx.CountQueued()).must(t), queued)
		for _, st := range allItemStatuses {
			want := []core.ItemID{}
			for _, id := range sorted {
				if model[id].Status == st {
					want = append(want, id)
				}
			}
			wantEqual(t, fmt.Sprintf("ItemsByStatus(%s)", st), itemIDs(get(tx.ItemsByStatus(st)).must(t)), want)
		}
		for _, a := range actors {
			var first core.ItemID
			for _, id := range sorted {
				if it := model[id]; it.Actor == a && it.Status == core.ItemQueued {
					first = id
					break
				}
			}
			got, err := tx.NextQueued(a, nil)
			if first == 0 {
				wantNotFound(t, fmt.Sprintf("NextQueued(%s) with empty queue", a), err)
			} else if err != nil || got.ID != first {
				t.Errorf("NextQueued(%s) = %d, %v; want %d", a, got.ID, err, first)
			} else {
				wantEqual(t, fmt.Sprintf("NextQueued(%s) item", a), got, model[first])
			}
			for _, th := range threads {
				want := []core.ItemID{}
				for _, id := range sorted {
					if it := model[id]; it.Actor == a && it.Thread == th && it.Status == core.ItemQueued {
						want = append(want, id)
					}
				}
				wantEqual(t, fmt.Sprintf("QueuedInThread(%s, %d)", a, th), itemIDs(get(tx.QueuedInThread(a, th)).must(t)), want)
			}
		}
		return nil
	})
}

// testItemLifecycle walks items through queued -> processing -> done the way the
// scheduler does, checking all item queries after every step.
func testItemLifecycle(t *testing.T, s core.Store) {
	eng, qa := core.BotActorID("eng"), core.BotActorID("qa")
	actors := []core.ActorID{eng, qa, core.BotActorID("idle")}
	var th1, th2 core.ThreadID
	model := map[core.ItemID]core.InboxItem{}
	update(t, s, func(tx core.Tx) error {
		th1, th2 = newThread(t, tx, "a").ID, newThread(t, tx, "b").ID
		for _, p := range []struct {
			a  core.ActorID
			th core.ThreadID
		}{{eng, th1}, {qa, th1}, {eng, th2}, {eng, th1}, {qa, th2}, {eng, th2}} {
			it := newItem(t, tx, p.a, p.th)
			model[it.ID] = it
		}
		return nil
	})
	threads := []core.ThreadID{th1, th2}
	checkItems(t, s, model, actors, threads)

	// The scheduler picks eng's oldest item and coalesces its thread.
	var batch []core.InboxItem
	update(t, s, func(tx core.Tx) error {
		first := get(tx.NextQueued(eng, nil)).must(t)
		batch = get(tx.QueuedInThread(eng, first.Thread)).must(t)
		if len(batch) != 2 || batch[0].ID != first.ID {
			t.Fatalf("QueuedInThread(eng, %d) = %v, want 2 items starting with %d", first.Thread, itemIDs(batch), first.ID)
		}
		for _, it := range batch {
			it.Status = core.ItemProcessing
			model[it.ID] = get(tx.PutItem(it)).must(t)
		}
		return nil
	})
	checkItems(t, s, model, actors, threads)

	update(t, s, func(tx core.Tx) error {
		for _, it := range batch {
			it.Status = core.ItemDone
			model[it.ID] = get(tx.PutItem(it)).must(t)
		}
		// A cancel and a failure elsewhere.
		q := get(tx.NextQueued(qa, nil)).must(t)
		q.Status = core.ItemCancelled
		model[q.ID] = get(tx.PutItem(q)).must(t)
		return nil
	})
	checkItems(t, s, model, actors, threads)

	// Recovery puts a processing item back to queued.
	update(t, s, func(tx core.Tx) error {
		it := get(tx.NextQueued(eng, nil)).must(t)
		it.Status = core.ItemProcessing
		model[it.ID] = get(tx.PutItem(it)).must(t)
		return nil
	})
	checkItems(t, s, model, actors, threads)
	update(t, s, func(tx core.Tx) error {
		for _, it := range get(tx.ItemsByStatus(core.ItemProcessing)).must(t) {
			it.Status = core.ItemQueued
			model[it.ID] = get(tx.PutItem(it)).must(t)
		}
		return nil
	})
	checkItems(t, s, model, actors, threads)

	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Item(999999)
		wantNotFound(t, "Item(missing)", err)
		return nil
	})
	err := s.Update(t.Context(), func(tx core.Tx) error {
		_, err := tx.PutItem(core.InboxItem{ID: 999999, Actor: eng, Thread: th1, Kind: core.ItemMessage, Status: core.ItemQueued})
		return err
	})
	wantNotFound(t, "PutItem with unassigned ID", err)
}

// testItemIndexesModel applies a seeded random sequence of creates and status
// changes (including moves between mailboxes and threads) and checks every query
// against the model after each transaction.
func testItemIndexesModel(t *testing.T, s core.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	actors := []core.ActorID{"bot:a", "bot:ab", "bot:b", "slack:T1:U1"}
	var threads []core.ThreadID
	update(t, s, func(tx core.Tx) error {
		for i := range 4 {
			threads = append(threads, newThread(t, tx, fmt.Sprint(i)).ID)
		}
		return nil
	})
	model := map[core.ItemID]core.InboxItem{}
	var ids []core.ItemID
	for step := range 30 {
		update(t, s, func(tx core.Tx) error {
			for range 1 + rng.IntN(4) {
				if len(ids) == 0 || rng.IntN(3) == 0 {
					it := newItem(t, tx, actors[rng.IntN(len(actors))], threads[rng.IntN(len(threads))])
					model[it.ID] = it
					ids = append(ids, it.ID)
					continue
				}
				it := model[ids[rng.IntN(len(ids))]]
				it.Status = allItemStatuses[rng.IntN(len(allItemStatuses))]
				if rng.IntN(5) == 0 {
					it.Actor = actors[rng.IntN(len(actors))]
					it.Thread = threads[rng.IntN(len(threads))]
				}
				model[it.ID] = get(tx.PutItem(it)).must(t)
			}
			return nil
		})
		checkItems(t, s, model, actors, threads)
		if t.Failed() {
			t.Fatalf("item indexes disagree with the model after step %d", step)
		}
	}
}

// testNextQueuedSkip parks a thread (skip returns true for its items) and checks
// that NextQueued walks past it in order and stops at the first item not skipped.
func testNextQueuedSkip(t *testing.T, s core.Store) {
	eng := core.BotActorID("eng")
	var parked, open core.ThreadID
	var items []core.InboxItem
	update(t, s, func(tx core.Tx) error {
		parked, open = newThread(t, tx, "parked").ID, newThread(t, tx, "open").ID
		for _, th := range []core.ThreadID{parked, parked, open, parked, open} {
			items = append(items, newItem(t, tx, eng, th))
		}
		newItem(t, tx, core.BotActorID("other"), open)
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		var seen []core.ItemID
		got, err := tx.NextQueued(eng, func(it core.InboxItem) bool {
			seen = append(seen, it.ID)
			if it.Actor != eng || it.Status != core.ItemQueued {
				t.Errorf("skip saw item %+v, not a queued item of %s", it, eng)
			}
			return it.Thread == parked
		})
		if err != nil || got.ID != items[2].ID {
			t.Fatalf("NextQueued(skip parked) = %d, %v; want %d", got.ID, err, items[2].ID)
		}
		wantEqual(t, "items offered to skip", seen, itemIDs(items[:3]))

		_, err = tx.NextQueued(eng, func(core.InboxItem) bool { return true })
		wantNotFound(t, "NextQueued(skip all)", err)
		_, err = tx.NextQueued(core.BotActorID("nobody"), nil)
		wantNotFound(t, "NextQueued(empty mailbox)", err)
		return nil
	})
	// After the open thread's items are taken, only parked ones remain.
	update(t, s, func(tx core.Tx) error {
		for _, it := range get(tx.QueuedInThread(eng, open)).must(t) {
			it.Status = core.ItemProcessing
			get(tx.PutItem(it)).must(t)
		}
		_, err := tx.NextQueued(eng, func(it core.InboxItem) bool { return it.Thread == parked })
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("NextQueued with only parked items left: %v, want ErrNotFound", err)
		}
		wantEqual(t, "NextQueued(nil) still sees parked", get(tx.NextQueued(eng, nil)).must(t).ID, items[0].ID)
		return nil
	})
}
