package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"openbot/core"
)

func testActorsAndBots(t *testing.T, s core.Store) {
	human := core.Actor{ID: "slack:T1:U1", Kind: core.ActorHuman, Name: "Alice", Created: at(0)}
	bot := core.Actor{ID: core.BotActorID("engineer"), Kind: core.ActorBot, Name: "Engineer", Handle: "engineer", Created: at(1)}
	eng := core.BotProfile{Handle: "engineer", Name: "Engineer", Instructions: "fix it", LLM: "default",
		Tools: []string{"shell", "read_file"}, ApprovalTools: []string{"shell"}, Memory: true, MaxModelCalls: 7}
	qa := core.BotProfile{Handle: "qa", Name: "QA", Tools: []string{"shell"}}
	update(t, s, func(tx core.Tx) error {
		for _, a := range []core.Actor{human, bot} {
			if err := tx.PutActor(a); err != nil {
				return err
			}
		}
		if err := tx.PutBot(qa); err != nil {
			return err
		}
		return tx.PutBot(eng)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Actor(human)", get(tx.Actor(human.ID)).must(t), human)
		wantEqual(t, "Actor(bot)", get(tx.Actor(bot.ID)).must(t), bot)
		_, err := tx.Actor("slack:T1:nobody")
		wantNotFound(t, "Actor(missing)", err)
		wantEqual(t, "Bot(engineer)", get(tx.Bot("engineer")).must(t), eng)
		_, err = tx.Bot("nobody")
		wantNotFound(t, "Bot(missing)", err)
		bots := get(tx.Bots()).must(t)
		slices.SortFunc(bots, func(a, b core.BotProfile) int { return cmpString(a.Handle, b.Handle) })
		wantEqual(t, "Bots", bots, []core.BotProfile{eng, qa})
		return nil
	})
	// Upserts replace.
	human.Name = "Alice B."
	eng.Instructions = "fix it well"
	update(t, s, func(tx core.Tx) error {
		if err := tx.PutActor(human); err != nil {
			return err
		}
		return tx.PutBot(eng)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Actor after upsert", get(tx.Actor(human.ID)).must(t), human)
		wantEqual(t, "Bot after upsert", get(tx.Bot("engineer")).must(t), eng)
		wantEqual(t, "len(Bots) after upsert", len(get(tx.Bots()).must(t)), 2)
		return nil
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testThreads(t *testing.T, s core.Store) {
	var stored []core.Thread
	update(t, s, func(tx core.Tx) error {
		for i := range 4 {
			th := core.Thread{
				Key: fmt.Sprintf("slack:T1:C1:%d", i), Title: fmt.Sprintf("task %d", i),
				DefaultBot:   core.BotActorID("chief"),
				Participants: []core.ActorID{"slack:T1:U1", core.BotActorID("chief")},
				Bindings:     []core.Binding{{Platform: "slack", Conversation: "C1/1", Accounts: []core.AccountID{"slack/acme"}}},
				Held:         []core.HeldHandoff{{From: core.BotActorID("chief"), Target: core.BotActorID("qa"), Message: 3}},
				Created:      at(i),
			}
			got := get(tx.PutThread(th)).must(t)
			if got.ID == 0 {
				t.Fatalf("PutThread assigned ID 0")
			}
			th.ID = got.ID
			wantEqual(t, "PutThread result", got, th)
			// Read-your-writes inside the transaction.
			wantEqual(t, "Thread in same tx", get(tx.Thread(got.ID)).must(t), th)
			stored = append(stored, th)
		}
		return nil
	})
	for i := 1; i < len(stored); i++ {
		if stored[i].ID <= stored[i-1].ID {
			t.Fatalf("thread IDs not increasing: %d then %d", stored[i-1].ID, stored[i].ID)
		}
	}
	view(t, s, func(tx core.ReadTx) error {
		for _, th := range stored {
			wantEqual(t, fmt.Sprintf("Thread(%d)", th.ID), get(tx.Thread(th.ID)).must(t), th)
		}
		_, err := tx.Thread(stored[3].ID + 100)
		wantNotFound(t, "Thread(missing)", err)
		newestFirst := []core.Thread{stored[3], stored[2], stored[1], stored[0]}
		wantEqual(t, "Threads(0)", get(tx.Threads(0)).must(t), newestFirst)
		wantEqual(t, "Threads(2)", get(tx.Threads(2)).must(t), newestFirst[:2])
		wantEqual(t, "Threads(10)", get(tx.Threads(10)).must(t), newestFirst)
		return nil
	})
	// Replace keeps the ID and changes the record.
	th := stored[1]
	th.Title = "renamed"
	th.HopLimitNotified = true
	th.Participants = append(th.Participants, core.BotActorID("qa"))
	update(t, s, func(tx core.Tx) error {
		wantEqual(t, "PutThread replace", get(tx.PutThread(th)).must(t), th)
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Thread after replace", get(tx.Thread(th.ID)).must(t), th)
		wantEqual(t, "len(Threads) after replace", len(get(tx.Threads(0)).must(t)), 4)
		return nil
	})
	err := s.Update(t.Context(), func(tx core.Tx) error {
		_, err := tx.PutThread(core.Thread{ID: stored[3].ID + 50, Key: "x"})
		return err
	})
	wantNotFound(t, "PutThread with unassigned ID", err)
}

func testThreadKeys(t *testing.T, s core.Store) {
	var a, b core.Thread
	update(t, s, func(tx core.Tx) error {
		a = newThread(t, tx, "telegram:42")
		b = newThread(t, tx, "telegram:42#2")
		return tx.BindThreadKey("telegram:42", a.ID)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "ThreadByKey", get(tx.ThreadByKey("telegram:42")).must(t), a.ID)
		_, err := tx.ThreadByKey("telegram:43")
		wantNotFound(t, "ThreadByKey(unbound)", err)
		return nil
	})
	// /new rebinds the key to a fresh thread.
	update(t, s, func(tx core.Tx) error { return tx.BindThreadKey("telegram:42", b.ID) })
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "ThreadByKey after rebind", get(tx.ThreadByKey("telegram:42")).must(t), b.ID)
		wantEqual(t, "old thread kept", get(tx.Thread(a.ID)).must(t).Key, "telegram:42")
		return nil
	})
}

func testMessages(t *testing.T, s core.Store) {
	var th1, th2, empty core.Thread
	var in1, in2 []core.Message
	update(t, s, func(tx core.Tx) error {
		th1 = newThread(t, tx, "a")
		th2 = newThread(t, tx, "b")
		empty = newThread(t, tx, "c")
		// Interleave the two threads so a prefix walk that leaks is caught.
		for i := range 5 {
			m := core.Message{Thread: th1.ID, Sender: core.BotActorID("eng"), SenderName: "Eng", Text: fmt.Sprintf("one %d", i),
				Mentions: []string{"qa"}, Hop: i, Run: 9, Kind: core.KindChat, Created: at(i)}
			got := get(tx.PutMessage(m)).must(t)
			m.ID = got.ID
			wantEqual(t, "PutMessage result", got, m)
			in1 = append(in1, m)
			m2 := core.Message{Thread: th2.ID, Sender: "slack:T1:U1", SenderName: "Alice", Text: fmt.Sprintf("two %d", i),
				Origin: &core.Origin{Account: "slack/acme", Conversation: "C1/1", PlatformID: "1700.1"}, Created: at(i)}
			m2.ID = get(tx.PutMessage(m2)).must(t).ID
			in2 = append(in2, m2)
		}
		return nil
	})
	all := append(append([]core.Message{}, in1...), in2...)
	slices.SortFunc(all, func(a, b core.Message) int { return int(a.ID) - int(b.ID) })
	for i := 1; i < len(all); i++ {
		if all[i].ID == all[i-1].ID {
			t.Fatalf("message ID %d assigned twice", all[i].ID)
		}
	}
	if in1[1].ID <= in1[0].ID || in2[0].ID <= in1[0].ID {
		t.Fatalf("message IDs not in assignment order: %d %d %d", in1[0].ID, in1[1].ID, in2[0].ID)
	}
	rev := func(l []core.Message) []core.Message { c := slices.Clone(l); slices.Reverse(c); return c }
	view(t, s, func(tx core.ReadTx) error {
		for _, m := range all {
			wantEqual(t, fmt.Sprintf("Message(%d)", m.ID), get(tx.Message(m.ID)).must(t), m)
		}
		_, err := tx.Message(all[len(all)-1].ID + 100)
		wantNotFound(t, "Message(missing)", err)

		wantEqual(t, "Messages(th1, 0, 0)", get(tx.Messages(th1.ID, 0, 0)).must(t), in1)
		wantEqual(t, "Messages(th2, 0, 0)", get(tx.Messages(th2.ID, 0, 0)).must(t), in2)
		wantEqual(t, "Messages(th1, 0, 2)", messageIDs(get(tx.Messages(th1.ID, 0, 2)).must(t)), messageIDs(in1[:2]))
		wantEqual(t, "Messages(th1, in1[1], 2)", messageIDs(get(tx.Messages(th1.ID, in1[1].ID, 2)).must(t)), messageIDs(in1[2:4]))
		wantEqual(t, "Messages(th1, last, 0)", len(get(tx.Messages(th1.ID, in1[4].ID, 0)).must(t)), 0)
		wantEqual(t, "Messages(empty)", len(get(tx.Messages(empty.ID, 0, 0)).must(t)), 0)
		wantEqual(t, "Messages(unknown thread)", len(get(tx.Messages(empty.ID+10, 0, 0)).must(t)), 0)

		wantEqual(t, "MessagesBefore(th1, 0, 0)", get(tx.MessagesBefore(th1.ID, 0, 0)).must(t), rev(in1))
		wantEqual(t, "MessagesBefore(th1, 0, 2)", messageIDs(get(tx.MessagesBefore(th1.ID, 0, 2)).must(t)), messageIDs(rev(in1)[:2]))
		wantEqual(t, "MessagesBefore(th1, in1[3], 0)", messageIDs(get(tx.MessagesBefore(th1.ID, in1[3].ID, 0)).must(t)), messageIDs(rev(in1[:3])))
		wantEqual(t, "MessagesBefore(th1, in1[3], 2)", messageIDs(get(tx.MessagesBefore(th1.ID, in1[3].ID, 2)).must(t)), messageIDs(rev(in1[1:3])))
		wantEqual(t, "MessagesBefore(th1, first, 0)", len(get(tx.MessagesBefore(th1.ID, in1[0].ID, 0)).must(t)), 0)
		wantEqual(t, "MessagesBefore(th2, 0, 0)", messageIDs(get(tx.MessagesBefore(th2.ID, 0, 0)).must(t)), messageIDs(rev(in2)))
		wantEqual(t, "MessagesBefore(empty)", len(get(tx.MessagesBefore(empty.ID, 0, 0)).must(t)), 0)

		wantEqual(t, "CountMessages(th1)", get(tx.CountMessages(th1.ID)).must(t), 5)
		wantEqual(t, "CountMessages(th2)", get(tx.CountMessages(th2.ID)).must(t), 5)
		wantEqual(t, "CountMessages(empty)", get(tx.CountMessages(empty.ID)).must(t), 0)
		return nil
	})
	// Replacing a message keeps its place.
	edited := in1[2]
	edited.Text = "edited"
	update(t, s, func(tx core.Tx) error {
		get(tx.PutMessage(edited)).must(t)
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Message after replace", get(tx.Message(edited.ID)).must(t), edited)
		wantEqual(t, "CountMessages after replace", get(tx.CountMessages(th1.ID)).must(t), 5)
		wantEqual(t, "Messages after replace", get(tx.Messages(th1.ID, in1[1].ID, 1)).must(t), []core.Message{edited})
		return nil
	})
}

func testDedup(t *testing.T, s core.Store) {
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Seen("slack:T1:C1:1700.1")
		wantNotFound(t, "Seen(unknown)", err)
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		if err := tx.MarkSeen("slack:T1:C1:1700.1", 7); err != nil {
			return err
		}
		return tx.MarkSeen("telegram:42:1", 8)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Seen(slack)", get(tx.Seen("slack:T1:C1:1700.1")).must(t), core.MessageID(7))
		wantEqual(t, "Seen(telegram)", get(tx.Seen("telegram:42:1")).must(t), core.MessageID(8))
		return nil
	})
	update(t, s, func(tx core.Tx) error { return tx.MarkSeen("telegram:42:1", 9) })
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Seen after replace", get(tx.Seen("telegram:42:1")).must(t), core.MessageID(9))
		return nil
	})
}

func testTodo(t *testing.T, s core.Store) {
	eng, qa := core.BotActorID("eng"), core.BotActorID("qa")
	list := []core.TodoItem{{Text: "write test", Status: "done"}, {Text: "fix bug", Status: "in_progress"}}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Todo(unsaved)", get(tx.Todo(eng, 1)).must(t), []core.TodoItem(nil))
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		if err := tx.PutTodo(eng, 1, list); err != nil {
			return err
		}
		return tx.PutTodo(qa, 1, list[:1])
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Todo(eng, 1)", get(tx.Todo(eng, 1)).must(t), list)
		wantEqual(t, "Todo(qa, 1)", get(tx.Todo(qa, 1)).must(t), list[:1])
		wantEqual(t, "Todo(eng, 2)", get(tx.Todo(eng, 2)).must(t), []core.TodoItem(nil))
		return nil
	})
	list2 := []core.TodoItem{{Text: "ship", Status: "pending"}}
	update(t, s, func(tx core.Tx) error {
		if err := tx.PutTodo(eng, 1, list2); err != nil {
			return err
		}
		return tx.PutTodo(qa, 1, nil)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Todo after replace", get(tx.Todo(eng, 1)).must(t), list2)
		wantEqual(t, "Todo after clear", get(tx.Todo(qa, 1)).must(t), []core.TodoItem(nil))
		return nil
	})
}

func testActivities(t *testing.T, s core.Store) {
	var want []core.Activity
	for i := range 7 {
		a := core.Activity{Event: "run.started", Level: "info", Summary: fmt.Sprintf("step %d", i), Thread: 1, Actor: "bot:eng", Run: 2, Item: 3, Message: 4, At: at(i)}
		update(t, s, func(tx core.Tx) error { return tx.AppendActivity(a) })
		want = append(want, a)
	}
	var got []core.Activity
	view(t, s, func(tx core.ReadTx) error {
		got = get(tx.Activities(0, 0)).must(t)
		return nil
	})
	if len(got) != len(want) {
		t.Fatalf("Activities(0,0) returned %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq == 0 || (i > 0 && got[i].Seq <= got[i-1].Seq) {
			t.Fatalf("activity Seq not increasing from 1: %d after %d", got[i].Seq, got[max(i-1, 0)].Seq)
		}
		w := want[i]
		w.Seq = got[i].Seq
		wantEqual(t, fmt.Sprintf("activity %d", i), got[i], w)
	}
	// Page through three at a time.
	var paged []core.Activity
	after := uint64(0)
	for {
		var page []core.Activity
		view(t, s, func(tx core.ReadTx) error {
			page = get(tx.Activities(after, 3)).must(t)
			return nil
		})
		if len(page) > 3 {
			t.Fatalf("Activities(%d, 3) returned %d lines", after, len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Seq
	}
	wantEqual(t, "paged activities", paged, got)
}

func testCursors(t *testing.T, s core.Store) {
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Cursor(unset)", get(tx.Cursor("telegram/main")).must(t), "")
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		if err := tx.SetCursor("telegram/main", "1001"); err != nil {
			return err
		}
		return tx.SetCursor("telegram/other", "5")
	})
	update(t, s, func(tx core.Tx) error { return tx.SetCursor("telegram/main", "1002") })
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Cursor(main)", get(tx.Cursor("telegram/main")).must(t), "1002")
		wantEqual(t, "Cursor(other)", get(tx.Cursor("telegram/other")).must(t), "5")
		return nil
	})
}

// errBoom is returned by transactions that must roll back.
var errBoom = errors.New("boom")
