package storetest

import (
	"encoding/json"
	"testing"

	"openbot/core"
)

// testMemories: memories get IDs from 1, round-trip exactly, are listed per bot
// oldest first, cannot move to another bot, and are deleted from the bot's list
// (seed §9).
func testMemories(t *testing.T, s core.Store) {
	var a, b, c core.Memory
	update(t, s, func(tx core.Tx) error {
		a = get(tx.PutMemory(core.Memory{Bot: "eng", Text: "squash merges", Created: at(0), Updated: at(0),
			Source: core.MemorySourceTool, Run: 3, Embedding: []float32{0.5, -1}, EmbeddingModel: "p/m"})).must(t)
		b = get(tx.PutMemory(core.Memory{Bot: "qa", Text: "run the smoke suite", Created: at(1), Updated: at(1), Source: core.MemorySourceReflection, Run: 4})).must(t)
		c = get(tx.PutMemory(core.Memory{Bot: "eng", Text: "short updates", Created: at(2), Updated: at(2), Source: core.MemorySourceOperator})).must(t)
		if _, err := tx.PutMemory(core.Memory{Bot: "eng"}); err == nil {
			t.Error("PutMemory without text: no error")
		}
		return nil
	})
	if a.ID != 1 || b.ID != 2 || c.ID != 3 {
		t.Fatalf("memory IDs = %d %d %d, want 1 2 3", a.ID, b.ID, c.ID)
	}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Memory(1)", get(tx.Memory(a.ID)).must(t), a)
		wantEqual(t, "Memories(eng)", get(tx.Memories("eng")).must(t), []core.Memory{a, c})
		if got := get(tx.Memories("nobody")).must(t); len(got) != 0 {
			t.Errorf("Memories(nobody) = %v, want none", got)
		}
		_, err := tx.Memory(99)
		wantNotFound(t, "Memory(99)", err)
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		a.Text, a.Updated, a.Source, a.Run = "rebase merges", at(5), core.MemorySourceReflection, 9
		a = get(tx.PutMemory(a)).must(t)
		moved := b
		moved.Bot = "eng"
		if _, err := tx.PutMemory(moved); err == nil {
			t.Error("PutMemory moved a memory to another bot")
		}
		_, err := tx.PutMemory(core.Memory{ID: 50, Bot: "eng", Text: "x"})
		wantNotFound(t, "PutMemory of an unassigned ID", err)
		if err := tx.DeleteMemory(c.ID); err != nil {
			return err
		}
		wantNotFound(t, "DeleteMemory twice", tx.DeleteMemory(c.ID))
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "Memories(eng) after update and delete", get(tx.Memories("eng")).must(t), []core.Memory{a})
		wantEqual(t, "Memories(qa)", get(tx.Memories("qa")).must(t), []core.Memory{b})
		return nil
	})
}

// testPendingReflections: pending reflections get Seq from 1, round-trip, list
// oldest first, and delete idempotently (seed G7).
func testPendingReflections(t *testing.T, s core.Store) {
	var p1, p2 core.PendingReflection
	update(t, s, func(tx core.Tx) error {
		p1 = get(tx.PutPendingReflection(core.PendingReflection{Bot: "eng", Thread: 2, Run: 7, At: at(0),
			Transcript: json.RawMessage(`{"v":1}`), Reply: "done"})).must(t)
		p2 = get(tx.PutPendingReflection(core.PendingReflection{Bot: "qa", Thread: 3, Run: 8, At: at(1)})).must(t)
		if _, err := tx.PutPendingReflection(core.PendingReflection{Bot: "eng"}); err == nil {
			t.Error("PutPendingReflection without thread: no error")
		}
		return nil
	})
	if p1.Seq != 1 || p2.Seq != 2 {
		t.Fatalf("Seq = %d %d, want 1 2", p1.Seq, p2.Seq)
	}
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "PendingReflections", get(tx.PendingReflections()).must(t), []core.PendingReflection{p1, p2})
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		if err := tx.DeletePendingReflection(p1.Seq); err != nil {
			return err
		}
		return tx.DeletePendingReflection(p1.Seq)
	})
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "PendingReflections after delete", get(tx.PendingReflections()).must(t), []core.PendingReflection{p2})
		return nil
	})
}

// testMessageVectors: message vectors round-trip, are listed per thread oldest
// message first, replace an earlier vector of the same message, and are
// refused without a vector (seed §9: the semantic index of messages).
func testMessageVectors(t *testing.T, s core.Store) {
	a := core.MessageVector{Thread: 1, Message: 3, Model: "p/m", Vector: []float32{0.5, -1}}
	b := core.MessageVector{Thread: 1, Message: 2, Model: "p/m", Vector: []float32{1, 0}}
	c := core.MessageVector{Thread: 2, Message: 4, Model: "p/m", Vector: []float32{0, 1}}
	update(t, s, func(tx core.Tx) error {
		for _, v := range []core.MessageVector{a, b, c} {
			if err := tx.PutMessageVector(v); err != nil {
				return err
			}
		}
		if err := tx.PutMessageVector(core.MessageVector{Thread: 1, Message: 5, Model: "p/m"}); err == nil {
			t.Error("PutMessageVector without vector: no error")
		}
		return nil
	})
	a.Model, a.Vector = "p/other", []float32{2, 2, 2}
	update(t, s, func(tx core.Tx) error { return tx.PutMessageVector(a) })
	view(t, s, func(tx core.ReadTx) error {
		wantEqual(t, "MessageVectors(1)", get(tx.MessageVectors(1)).must(t), []core.MessageVector{b, a})
		wantEqual(t, "MessageVectors(2)", get(tx.MessageVectors(2)).must(t), []core.MessageVector{c})
		if got := get(tx.MessageVectors(9)).must(t); len(got) != 0 {
			t.Errorf("MessageVectors(9) = %v, want none", got)
		}
		return nil
	})
}
