package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"openbot/core"
	"openbot/store/check"
)

// Bot memory (schema version 5, seed §9): memories by ID with a per-bot index,
// and the pending reflections of G7.

func memoryBotKey(bot string, id core.MemoryID) []byte {
	return append(prefixKey(bot), u64(uint64(id))...)
}

// Memory implements core.ReadTx.
func (r *readTx) Memory(id core.MemoryID) (core.Memory, error) {
	var m core.Memory
	err := r.get(bktMemories, u64(uint64(id)), &m, fmt.Sprintf("memory %d", id))
	return m, err
}

// Memories implements core.ReadTx by a cursor over the bot's index.
func (r *readTx) Memories(bot string) ([]core.Memory, error) {
	var out []core.Memory
	prefix := prefixKey(bot)
	mems := r.bucket(bktMemories)
	c := r.bucket(bktMemoryBot).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		id := k[len(prefix):]
		v := mems.Get(id)
		if v == nil {
			return nil, fmt.Errorf("memory %d of @%s: index without record", decodeU64(id), bot)
		}
		var m core.Memory
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("memory %d: decode: %w", decodeU64(id), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// PendingReflections implements core.ReadTx.
func (r *readTx) PendingReflections() ([]core.PendingReflection, error) {
	var out []core.PendingReflection
	err := r.bucket(bktReflections).ForEach(func(k, v []byte) error {
		var p core.PendingReflection
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("pending reflection %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// PutMemory implements core.Tx.
func (w *writeTx) PutMemory(m core.Memory) (core.Memory, error) {
	if err := check.Memory(m); err != nil {
		return m, err
	}
	if m.ID == 0 {
		id, err := w.nextID(bktMemories)
		if err != nil {
			return m, err
		}
		m.ID = core.MemoryID(id)
	} else if err := check.MemoryUpdate(m, w.Memory); err != nil {
		return m, err
	}
	if err := w.put(bktMemories, u64(uint64(m.ID)), m); err != nil {
		return m, err
	}
	return m, w.bucket(bktMemoryBot).Put(memoryBotKey(m.Bot, m.ID), nil)
}

// DeleteMemory implements core.Tx.
func (w *writeTx) DeleteMemory(id core.MemoryID) error {
	m, err := w.Memory(id)
	if err != nil {
		return err
	}
	if err := w.bucket(bktMemories).Delete(u64(uint64(id))); err != nil {
		return err
	}
	return w.bucket(bktMemoryBot).Delete(memoryBotKey(m.Bot, id))
}

// PutPendingReflection implements core.Tx.
func (w *writeTx) PutPendingReflection(p core.PendingReflection) (core.PendingReflection, error) {
	if err := check.PendingReflection(p); err != nil {
		return p, err
	}
	seq, err := w.nextID(bktReflections)
	if err != nil {
		return p, err
	}
	p.Seq = seq
	return p, w.put(bktReflections, u64(seq), p)
}

// DeletePendingReflection implements core.Tx.
func (w *writeTx) DeletePendingReflection(seq uint64) error {
	return w.bucket(bktReflections).Delete(u64(seq))
}

// MessageVectors implements core.ReadTx by a cursor over the thread's keys.
func (r *readTx) MessageVectors(thread core.ThreadID) ([]core.MessageVector, error) {
	var out []core.MessageVector
	prefix := u64(uint64(thread))
	c := r.bucket(bktMessageVectors).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var mv core.MessageVector
		if err := json.Unmarshal(v, &mv); err != nil {
			return nil, fmt.Errorf("message vector %x: decode: %w", k, err)
		}
		out = append(out, mv)
	}
	return out, nil
}

// PutMessageVector implements core.Tx.
func (w *writeTx) PutMessageVector(v core.MessageVector) error {
	if err := check.MessageVector(v); err != nil {
		return err
	}
	return w.put(bktMessageVectors, append(u64(uint64(v.Thread)), u64(uint64(v.Message))...), v)
}
