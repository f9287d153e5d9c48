package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"openbot/core"
)

// testConsolePaging pins the console's cursor reads (DESIGN.md §10): each page
// continues exactly after the last one, newest first for the "Before" reads and
// oldest first for the "Since" reads, and a zero cursor starts at the end.
func testConsolePaging(t *testing.T, s core.Store) {
	var threads []core.ThreadID
	var runs []core.RunID
	var msgs []core.MessageID
	update(t, s, func(tx core.Tx) error {
		for i := range 5 {
			th := newThread(t, tx, fmt.Sprintf("k%d", i))
			threads = append(threads, th.ID)
			msgs = append(msgs, newMessage(t, tx, th.ID, "hi").ID)
			r := get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunCompleted, Created: at(i)})).must(t)
			runs = append(runs, r.ID)
			if err := tx.AppendActivity(core.Activity{Event: "e", Summary: fmt.Sprint(i), At: at(i)}); err != nil {
				return err
			}
		}
		// A second message in the first thread comes last in MessagesSince.
		msgs = append(msgs, newMessage(t, tx, threads[0], "again").ID)
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		p1 := get(tx.ThreadsBefore(0, 2)).must(t)
		p2 := get(tx.ThreadsBefore(p1[1].ID, 2)).must(t)
		p3 := get(tx.ThreadsBefore(p2[1].ID, 2)).must(t)
		got := ids(append(append(p1, p2...), p3...), func(t core.Thread) core.ThreadID { return t.ID })
		wantEqual(t, "ThreadsBefore pages", got, []core.ThreadID{threads[4], threads[3], threads[2], threads[1], threads[0]})
		wantEqual(t, "ThreadsBefore(first)", len(get(tx.ThreadsBefore(threads[0], 0)).must(t)), 0)

		r1 := get(tx.RunsBefore(0, 3)).must(t)
		r2 := get(tx.RunsBefore(r1[2].ID, 0)).must(t)
		wantEqual(t, "RunsBefore pages", runIDs(append(r1, r2...)), []core.RunID{runs[4], runs[3], runs[2], runs[1], runs[0]})

		m1 := get(tx.MessagesSince(0, 4)).must(t)
		m2 := get(tx.MessagesSince(m1[3].ID, 4)).must(t)
		wantEqual(t, "MessagesSince pages", messageIDs(append(m1, m2...)), msgs)
		wantEqual(t, "MessagesSince text", m2[1].Text, "again")

		a1 := get(tx.ActivitiesBefore(0, 2)).must(t)
		a2 := get(tx.ActivitiesBefore(a1[1].Seq, 0)).must(t)
		var sums []string
		for _, a := range append(a1, a2...) {
			sums = append(sums, a.Summary)
		}
		wantEqual(t, "ActivitiesBefore pages", sums, []string{"4", "3", "2", "1", "0"})
		h := get(tx.Heads()).must(t)
		wantEqual(t, "Heads", h, core.LogHeads{Activity: a1[0].Seq, Message: msgs[len(msgs)-1]})
		return nil
	})
}

// testRunEventsSince: run events of every run come back in the order they were
// appended, across runs and transactions, and a page resumes after its last Pos.
func testRunEventsSince(t *testing.T, s core.Store) {
	var a, b core.Run
	update(t, s, func(tx core.Tx) error {
		th := newThread(t, tx, "k")
		a = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning})).must(t)
		b = get(tx.PutRun(core.Run{Bot: "bot:qa", Thread: th.ID, Status: core.RunRunning})).must(t)
		return nil
	})
	type step struct {
		run core.RunID
		seq uint64
	}
	var want []step
	for i, r := range []core.RunID{b.ID, a.ID, a.ID, b.ID, a.ID} {
		update(t, s, func(tx core.Tx) error {
			e := get(tx.AppendRunEvent(core.RunEvent{Run: r, Type: "text", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), At: at(i)})).must(t)
			want = append(want, step{r, e.Seq})
			return nil
		})
	}
	view(t, s, func(tx core.ReadTx) error {
		var got []step
		var after uint64
		for range 3 {
			page := get(tx.RunEventsSince(after, 2)).must(t)
			for _, e := range page {
				if e.Pos <= after {
					t.Errorf("Pos %d not after cursor %d", e.Pos, after)
				}
				got = append(got, step{e.Run, e.Seq})
				after = e.Pos
			}
		}
		wantEqual(t, "RunEventsSince order", got, want)
		wantEqual(t, "RunEventsSince(end)", len(get(tx.RunEventsSince(after, 0)).must(t)), 0)
		wantEqual(t, "Heads().RunEvent", get(tx.Heads()).must(t).RunEvent, after)
		all := get(tx.RunEventsSince(0, 0)).must(t)
		wantEqual(t, "payload", string(all[4].Payload), `{"i":4}`)
		return nil
	})
}
