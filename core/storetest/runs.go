package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"openbot/core"
)

func testRuns(t *testing.T, s core.Store) {
	var th core.Thread
	var r1, r2, r3 core.Run
	update(t, s, func(tx core.Tx) error {
		th = newThread(t, tx, "k")
		r1 = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunQueued, Items: []core.ItemID{1, 2}, Triggers: []core.MessageID{3}, Created: at(0)})).must(t)
		r2 = get(tx.PutRun(core.Run{Bot: "bot:qa", Thread: th.ID, Status: core.RunQueued, Created: at(1)})).must(t)
		r3 = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning, Created: at(2)})).must(t)
		return nil
	})
	if !(r1.ID > 0 && r2.ID > r1.ID && r3.ID > r2.ID) {
		t.Fatalf("run IDs not increasing: %d %d %d", r1.ID, r2.ID, r3.ID)
	}
	byStatus := func(want map[core.RunStatus][]core.RunID) {
		t.Helper()
		view(t, s, func(tx core.ReadTx) error {
			for _, st := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunWaitingHuman, core.RunCompleted, core.RunFailed, core.RunCancelled} {
				w := want[st]
				if w == nil {
					w = []core.RunID{}
				}
				wantEqual(t, fmt.Sprintf("RunsByStatus(%s)", st), runIDs(get(tx.RunsByStatus(st)).must(t)), w)
			}
			return nil
		})
	}
	byStatus(map[core.RunStatus][]core.RunID{core.RunQueued: {r1.ID, r2.ID}, core.RunRunning: {r3.ID}})

	r1.Status, r1.Started = core.RunRunning, at(5)
	r3.Status, r3.Checkpoint = core.RunWaitingHuman, json.RawMessage(`{"messages":[{"role":"user","content":"hi"}]}`)
	r3.Usage = core.Usage{PromptTokens: 10, CompletionTokens: 5, ModelCalls: 1}
	update(t, s, func(tx core.Tx) error {
		get(tx.PutRun(r1)).must(t)
		get(tx.PutRun(r3)).must(t)
		return nil
	})
	byStatus(map[core.RunStatus][]core.RunID{core.RunQueued: {r2.ID}, core.RunRunning: {r1.ID}, core.RunWaitingHuman: {r3.ID}})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Run(r1)", get(tx.Run(r1.ID)).must(t), r1)
		wantEqual(t, "Run(r3) with checkpoint", get(tx.Run(r3.ID)).must(t), r3)
		_, err := tx.Run(r3.ID + 10)
		wantNotFound(t, "Run(missing)", err)
		return nil
	})

	r1.Status, r1.Ended = core.RunCompleted, at(9)
	r2.Status, r2.Error = core.RunFailed, "server restarted"
	r3.Status = core.RunRunning
	update(t, s, func(tx core.Tx) error {
		get(tx.PutRun(r1)).must(t)
		get(tx.PutRun(r2)).must(t)
		get(tx.PutRun(r3)).must(t)
		return nil
	})
	byStatus(map[core.RunStatus][]core.RunID{core.RunRunning: {r3.ID}, core.RunCompleted: {r1.ID}, core.RunFailed: {r2.ID}})
	r3.Status = core.RunCancelled
	update(t, s, func(tx core.Tx) error { get(tx.PutRun(r3)).must(t); return nil })
	byStatus(map[core.RunStatus][]core.RunID{core.RunCompleted: {r1.ID}, core.RunFailed: {r2.ID}, core.RunCancelled: {r3.ID}})

	err := s.Update(t.Context(), func(tx core.Tx) error {
		_, err := tx.PutRun(core.Run{ID: r3.ID + 10, Bot: "bot:eng", Thread: th.ID, Status: core.RunQueued})
		return err
	})
	wantNotFound(t, "PutRun with unassigned ID", err)
}

func testRunEvents(t *testing.T, s core.Store) {
	var a, b, quiet core.Run
	update(t, s, func(tx core.Tx) error {
		th := newThread(t, tx, "k")
		a = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning})).must(t)
		b = get(tx.PutRun(core.Run{Bot: "bot:qa", Thread: th.ID, Status: core.RunRunning})).must(t)
		quiet = get(tx.PutRun(core.Run{Bot: "bot:qa", Thread: th.ID, Status: core.RunQueued})).must(t)
		return nil
	})
	var wantA, wantB []core.RunEvent
	for i := range 4 {
		update(t, s, func(tx core.Tx) error {
			for _, r := range []core.RunID{a.ID, b.ID} {
				e := core.RunEvent{Run: r, Type: "tool_call", Payload: json.RawMessage(fmt.Sprintf(`{"step":%d}`, i)), At: at(i)}
				got := get(tx.AppendRunEvent(e)).must(t)
				e.Seq = uint64(i + 1)
				wantEqual(t, "AppendRunEvent result", got, e)
				if r == a.ID {
					wantA = append(wantA, e)
				} else {
					wantB = append(wantB, e)
				}
			}
			return nil
		})
	}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "RunEvents(a)", get(tx.RunEvents(a.ID)).must(t), wantA)
		wantEqual(t, "RunEvents(b)", get(tx.RunEvents(b.ID)).must(t), wantB)
		wantEqual(t, "len(RunEvents(quiet))", len(get(tx.RunEvents(quiet.ID)).must(t)), 0)
		return nil
	})
}

func testOutbox(t *testing.T, s core.Store) {
	var entries []core.OutboxEntry
	update(t, s, func(tx core.Tx) error {
		for i := range 5 {
			o := core.OutboxEntry{Account: "slack/acme", Conversation: "C1/1", Thread: 1, Message: core.MessageID(i + 1),
				ReplyTo: "1700.1", Status: core.OutboxPending, Created: at(i)}
			got := get(tx.PutOutbox(o)).must(t)
			o.ID = got.ID
			wantEqual(t, "PutOutbox result", got, o)
			entries = append(entries, o)
		}
		return nil
	})
	for i := 1; i < len(entries); i++ {
		if entries[i].ID <= entries[i-1].ID {
			t.Fatalf("outbox IDs not increasing")
		}
	}
	pending := func(what string, after core.OutboxID, limit int, want ...core.OutboxEntry) {
		t.Helper()
		view(t, s, func(tx core.ReadTx) error {
			wantEqual(t, what, outboxIDs(get(tx.PendingOutbox(after, limit)).must(t)), append([]core.OutboxID{}, outboxIDs(want)...))
			return nil
		})
	}
	pending("PendingOutbox(0,0)", 0, 0, entries...)
	pending("PendingOutbox(0,2)", 0, 2, entries[:2]...)
	pending("PendingOutbox(e1,2)", entries[1].ID, 2, entries[2:4]...)

	// Deliver 0 and 2, fail 3 permanently, retry 4 (still pending).
	e0, e2, e3, e4 := entries[0], entries[2], entries[3], entries[4]
	e0.Status, e0.PlatformID, e0.Attempts = core.OutboxDelivered, "1700.2", 1
	e2.Status, e2.PlatformID, e2.Attempts = core.OutboxDelivered, "1700.3", 2
	e3.Status, e3.Error, e3.Attempts = core.OutboxFailed, "channel_not_found", 1
	e4.Attempts, e4.Error = 1, "ratelimited"
	update(t, s, func(tx core.Tx) error {
		for _, o := range []core.OutboxEntry{e0, e2, e3, e4} {
			get(tx.PutOutbox(o)).must(t)
		}
		return nil
	})
	pending("PendingOutbox after delivery", 0, 0, entries[1], e4)
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Outbox(e0)", get(tx.Outbox(e0.ID)).must(t), e0)
		wantEqual(t, "Outbox(e3)", get(tx.Outbox(e3.ID)).must(t), e3)
		wantEqual(t, "PendingOutbox entry", get(tx.PendingOutbox(e0.ID, 1)).must(t), []core.OutboxEntry{entries[1]})
		_, err := tx.Outbox(e4.ID + 10)
		wantNotFound(t, "Outbox(missing)", err)
		return nil
	})
	// A failed entry put back to pending (operator retry) is pending again.
	e3.Status = core.OutboxPending
	update(t, s, func(tx core.Tx) error { get(tx.PutOutbox(e3)).must(t); return nil })
	pending("PendingOutbox after requeue", 0, 0, entries[1], e3, e4)
}
