package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"openbot/core"
)

// testUpdateRollback writes one of everything and fails: nothing may be visible.
func testUpdateRollback(t *testing.T, s core.Store) {
	var keep core.Thread
	update(t, s, func(tx core.Tx) error {
		keep = newThread(t, tx, "keep")
		return tx.SetCursor("c", "1")
	})
	var th core.Thread
	var m core.Message
	var it core.InboxItem
	var r core.Run
	var o core.OutboxEntry
	err := s.Update(t.Context(), func(tx core.Tx) error {
		th = newThread(t, tx, "gone")
		m = newMessage(t, tx, th.ID, "hello")
		it = newItem(t, tx, "bot:eng", th.ID)
		r = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunQueued})).must(t)
		get(tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text"})).must(t)
		o = get(tx.PutOutbox(core.OutboxEntry{Account: "a/b", Conversation: "c", Thread: th.ID, Message: m.ID, Status: core.OutboxPending})).must(t)
		for _, err := range []error{
			tx.PutActor(core.Actor{ID: "slack:T1:U9", Kind: core.ActorHuman, Name: "Gone"}),
			tx.PutBot(core.BotProfile{Handle: "gone"}),
			tx.BindThreadKey("gone", th.ID),
			tx.MarkSeen("gone", m.ID),
			tx.PutTodo("bot:eng", th.ID, []core.TodoItem{{Text: "x", Status: "pending"}}),
			tx.AppendActivity(core.Activity{Event: "gone"}),
			tx.SetCursor("c", "2"),
		} {
			if err != nil {
				t.Fatalf("write in rolled-back tx: %v", err)
			}
		}
		keep.Title = "changed"
		get(tx.PutThread(keep)).must(t)
		return fmt.Errorf("wrapped: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Thread(th.ID)
		wantNotFound(t, "Thread after rollback", err)
		_, err = tx.Message(m.ID)
		wantNotFound(t, "Message after rollback", err)
		_, err = tx.Item(it.ID)
		wantNotFound(t, "Item after rollback", err)
		_, err = tx.Run(r.ID)
		wantNotFound(t, "Run after rollback", err)
		_, err = tx.Outbox(o.ID)
		wantNotFound(t, "Outbox after rollback", err)
		_, err = tx.Actor("slack:T1:U9")
		wantNotFound(t, "Actor after rollback", err)
		_, err = tx.Bot("gone")
		wantNotFound(t, "Bot after rollback", err)
		_, err = tx.ThreadByKey("gone")
		wantNotFound(t, "ThreadByKey after rollback", err)
		_, err = tx.Seen("gone")
		wantNotFound(t, "Seen after rollback", err)
		wantEqual(t, "Todo after rollback", get(tx.Todo("bot:eng", th.ID)).must(t), []core.TodoItem(nil))
		wantEqual(t, "Activities after rollback", len(get(tx.Activities(0, 0)).must(t)), 0)
		wantEqual(t, "Cursor after rollback", get(tx.Cursor("c")).must(t), "1")
		wantEqual(t, "Thread not replaced", get(tx.Thread(keep.ID)).must(t).Title, "")
		wantEqual(t, "CountQueued after rollback", get(tx.CountQueued()).must(t), 0)
		wantEqual(t, "queued after rollback", len(get(tx.ItemsByStatus(core.ItemQueued)).must(t)), 0)
		wantEqual(t, "runs after rollback", len(get(tx.RunsByStatus(core.RunQueued)).must(t)), 0)
		wantEqual(t, "RunEvents after rollback", len(get(tx.RunEvents(r.ID)).must(t)), 0)
		wantEqual(t, "PendingOutbox after rollback", len(get(tx.PendingOutbox(0, 0)).must(t)), 0)
		wantEqual(t, "Threads after rollback", len(get(tx.Threads(0)).must(t)), 1)
		return nil
	})
}

func testBatchRollback(t *testing.T, s core.Store) {
	// fn runs on bbolt's batch goroutine in some stores: no t.Fatal inside.
	err := s.Batch(t.Context(), func(tx core.Tx) error {
		if _, err := tx.PutThread(core.Thread{Key: "gone"}); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Batch returned %v, want fn's error", err)
	}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Threads after failed Batch", len(get(tx.Threads(0)).must(t)), 0)
		return nil
	})
}

// testValuesOutliveView reads records in a View, then overwrites them many times so
// any memory the store lent out would be reused, and checks the values kept.
func testValuesOutliveView(t *testing.T, s core.Store) {
	var th core.Thread
	var msgs []core.Message
	var r core.Run
	update(t, s, func(tx core.Tx) error {
		th = newThread(t, tx, "k")
		for i := range 3 {
			msgs = append(msgs, newMessage(t, tx, th.ID, fmt.Sprintf("message %d", i)))
		}
		r = get(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunWaitingHuman, Checkpoint: json.RawMessage(`{"k":"original"}`)})).must(t)
		get(tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text", Payload: json.RawMessage(`{"t":"original"}`)})).must(t)
		if err := tx.SetCursor("c", "original"); err != nil {
			return err
		}
		return tx.PutBot(core.BotProfile{Handle: "eng", Tools: []string{"original"}})
	})
	var (
		gotThread core.Thread
		gotMsgs   []core.Message
		gotRun    core.Run
		gotEvents []core.RunEvent
		gotCursor string
		gotBots   []core.BotProfile
	)
	view(t, s, func(tx core.ReadTx) error {
		gotThread = get(tx.Thread(th.ID)).must(t)
		gotMsgs = get(tx.Messages(th.ID, 0, 0)).must(t)
		gotRun = get(tx.Run(r.ID)).must(t)
		gotEvents = get(tx.RunEvents(r.ID)).must(t)
		gotCursor = get(tx.Cursor("c")).must(t)
		gotBots = get(tx.Bots()).must(t)
		return nil
	})
	for i := range 50 {
		update(t, s, func(tx core.Tx) error {
			th2 := th
			th2.Title = fmt.Sprintf("overwritten %d", i)
			get(tx.PutThread(th2)).must(t)
			for _, m := range msgs {
				m.Text = fmt.Sprintf("overwritten %d", i)
				get(tx.PutMessage(m)).must(t)
			}
			r2 := r
			r2.Checkpoint = json.RawMessage(fmt.Sprintf(`{"k":"overwritten %d"}`, i))
			get(tx.PutRun(r2)).must(t)
			get(tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text", Payload: json.RawMessage(`{"t":"more"}`)})).must(t)
			newThread(t, tx, fmt.Sprint(i))
			if err := tx.SetCursor("c", fmt.Sprintf("overwritten %d", i)); err != nil {
				return err
			}
			return tx.PutBot(core.BotProfile{Handle: "eng", Tools: []string{"overwritten"}})
		})
	}
	wantEqual(t, "thread read earlier", gotThread, th)
	wantEqual(t, "messages read earlier", gotMsgs, msgs)
	wantEqual(t, "run checkpoint read earlier", string(gotRun.Checkpoint), `{"k":"original"}`)
	wantEqual(t, "event payload read earlier", string(gotEvents[0].Payload), `{"t":"original"}`)
	wantEqual(t, "cursor read earlier", gotCursor, "original")
	wantEqual(t, "bot tools read earlier", gotBots[0].Tools, []string{"original"})
}

// testConcurrentBatch runs many Batch calls at once, each an ingestion-like write
// (thread, message, item, dedup key); every one must land exactly once.
func testConcurrentBatch(t *testing.T, s core.Store) {
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Batch(context.Background(), func(tx core.Tx) error {
				key := fmt.Sprintf("k%d", i)
				th, err := tx.PutThread(core.Thread{Key: key})
				if err != nil {
					return err
				}
				m, err := tx.PutMessage(core.Message{Thread: th.ID, Text: key})
				if err != nil {
					return err
				}
				if _, err := tx.PutItem(core.InboxItem{Actor: "bot:eng", Thread: th.ID, Kind: core.ItemMessage, Message: m.ID, Status: core.ItemQueued}); err != nil {
					return err
				}
				if err := tx.BindThreadKey(key, th.ID); err != nil {
					return err
				}
				return tx.MarkSeen(key, m.ID)
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Batch: %v", err)
		}
	}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "threads", len(get(tx.Threads(0)).must(t)), n)
		wantEqual(t, "CountQueued", get(tx.CountQueued()).must(t), n)
		wantEqual(t, "queued items", len(get(tx.ItemsByStatus(core.ItemQueued)).must(t)), n)
		for i := range n {
			key := fmt.Sprintf("k%d", i)
			m := get(tx.Message(get(tx.Seen(key)).must(t))).must(t)
			wantEqual(t, "message text of "+key, m.Text, key)
			wantEqual(t, "thread of "+key, get(tx.ThreadByKey(key)).must(t), m.Thread)
			wantEqual(t, "messages in thread of "+key, get(tx.CountMessages(m.Thread)).must(t), 1)
		}
		return nil
	})
}

func testCanceledContext(t *testing.T, s core.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	if err := s.View(ctx, func(core.ReadTx) error { called = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("View(canceled) = %v, want context.Canceled", err)
	}
	if err := s.Update(ctx, func(core.Tx) error { called = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update(canceled) = %v, want context.Canceled", err)
	}
	if err := s.Batch(ctx, func(core.Tx) error { called = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Batch(canceled) = %v, want context.Canceled", err)
	}
	if called {
		t.Errorf("fn ran under a canceled context")
	}
}

func testClose(t *testing.T, s core.Store) {
	update(t, s, func(tx core.Tx) error { return tx.SetCursor("c", "1") })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.View(context.Background(), func(core.ReadTx) error { return nil }); err == nil {
		t.Errorf("View after Close succeeded")
	}
	if err := s.Update(context.Background(), func(core.Tx) error { return nil }); err == nil {
		t.Errorf("Update after Close succeeded")
	}
	if err := s.Batch(context.Background(), func(core.Tx) error { return nil }); err == nil {
		t.Errorf("Batch after Close succeeded")
	}
}
