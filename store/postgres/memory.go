package postgres

import (
	"fmt"

	"openbot/core"
	"openbot/store/check"
)

// Bot memory (seed §9): one row per memory, keyed by ID with the bot's handle
// indexed; pending reflections (seed G7) in Seq order. Both carry the record's
// JSON like every other table.

func (r *readTx) Memory(id core.MemoryID) (core.Memory, error) {
	var m core.Memory
	err := r.one(&m, fmt.Sprintf("memory %d", id), `SELECT data FROM memories WHERE id = $1`, int64(id))
	return m, err
}

func (r *readTx) Memories(bot string) ([]core.Memory, error) {
	return list[core.Memory](r, "memories of "+bot, `SELECT data FROM memories WHERE bot = $1 ORDER BY id`, bot)
}

func (r *readTx) PendingReflections() ([]core.PendingReflection, error) {
	return list[core.PendingReflection](r, "pending reflections", `SELECT data FROM pending_reflections ORDER BY seq`)
}

// PutMemory stores m; ID 0 assigns the next memory ID, another ID must exist
// and keep its bot. A memory needs a bot and text.
func (w *writeTx) PutMemory(m core.Memory) (core.Memory, error) {
	if err := check.Memory(m); err != nil {
		return m, err
	}
	if m.ID == 0 {
		id, err := w.nextID("memories")
		if err != nil {
			return m, err
		}
		m.ID = core.MemoryID(id)
	} else if err := check.MemoryUpdate(m, w.Memory); err != nil {
		return m, err
	}
	return m, w.upsert("memory", `INSERT INTO memories (id, bot, data) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET bot = EXCLUDED.bot, data = EXCLUDED.data`, m, int64(m.ID), m.Bot)
}

// DeleteMemory removes a memory; core.ErrNotFound when there is none.
func (w *writeTx) DeleteMemory(id core.MemoryID) error {
	tag, err := w.tx.Exec(w.ctx, `DELETE FROM memories WHERE id = $1`, int64(id))
	if err != nil {
		return fmt.Errorf("memory %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("memory %d: %w", id, core.ErrNotFound)
	}
	return nil
}

// PutPendingReflection appends p with the next Seq.
func (w *writeTx) PutPendingReflection(p core.PendingReflection) (core.PendingReflection, error) {
	if err := check.PendingReflection(p); err != nil {
		return p, err
	}
	seq, err := w.nextID("reflections") // the counter name of package dump (the bbolt bucket)
	if err != nil {
		return p, err
	}
	p.Seq = seq
	return p, w.upsert("pending reflection", `INSERT INTO pending_reflections (seq, data) VALUES ($1, $2)`, p, int64(seq))
}

// DeletePendingReflection removes one; an absent one is no error.
func (w *writeTx) DeletePendingReflection(seq uint64) error {
	return w.exec("pending reflection", `DELETE FROM pending_reflections WHERE seq = $1`, int64(seq))
}

// MessageVectors returns a thread's message embeddings (seed §9), oldest
// message first.
func (r *readTx) MessageVectors(thread core.ThreadID) ([]core.MessageVector, error) {
	return list[core.MessageVector](r, fmt.Sprintf("message vectors of thread %d", thread),
		`SELECT data FROM message_vectors WHERE thread = $1 ORDER BY message`, int64(thread))
}

// PutMessageVector stores or replaces the embedding of one message.
func (w *writeTx) PutMessageVector(v core.MessageVector) error {
	if err := check.MessageVector(v); err != nil {
		return err
	}
	return w.upsert("message vector", `INSERT INTO message_vectors (thread, message, data) VALUES ($1, $2, $3)
		ON CONFLICT (thread, message) DO UPDATE SET data = EXCLUDED.data`, v, int64(v.Thread), int64(v.Message))
}
