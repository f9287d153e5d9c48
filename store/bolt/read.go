package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// readTx implements core.ReadTx on a bbolt transaction. Every value it returns is
// decoded from the page into fresh memory, so it outlives the transaction.
type readTx struct {
	tx *bbolt.Tx
}

var _ core.ReadTx = (*readTx)(nil)

func (r *readTx) bucket(name []byte) *bbolt.Bucket { return r.tx.Bucket(name) }

// get decodes the record under key in bucket into v, or returns ErrNotFound
// wrapped with what.
func (r *readTx) get(name, key []byte, v any, what string) error {
	var data []byte
	if len(key) > 0 {
		data = r.bucket(name).Get(key)
	}
	if data == nil {
		return fmt.Errorf("%s: %w", what, core.ErrNotFound)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: decode: %w", what, err)
	}
	return nil
}

func (r *readTx) Actor(id core.ActorID) (core.Actor, error) {
	var a core.Actor
	err := r.get(bktActors, []byte(id), &a, fmt.Sprintf("actor %q", id))
	return a, err
}

func (r *readTx) Bot(handle string) (core.BotProfile, error) {
	var b core.BotProfile
	err := r.get(bktBots, []byte(handle), &b, fmt.Sprintf("bot %q", handle))
	return b, err
}

// Bots returns every bot profile ordered by handle.
func (r *readTx) Bots() ([]core.BotProfile, error) {
	var out []core.BotProfile
	err := r.bucket(bktBots).ForEach(func(k, v []byte) error {
		var b core.BotProfile
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("bot %q: decode: %w", k, err)
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

func (r *readTx) Thread(id core.ThreadID) (core.Thread, error) {
	var t core.Thread
	err := r.get(bktThreads, u64(uint64(id)), &t, fmt.Sprintf("thread %d", id))
	return t, err
}

func (r *readTx) ThreadByKey(key string) (core.ThreadID, error) {
	var v []byte
	if key != "" {
		v = r.bucket(bktThreadKeys).Get([]byte(key))
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("thread key %q: %w", key, core.ErrNotFound)
	}
	return core.ThreadID(decodeU64(v)), nil
}

// Threads walks the threads bucket backwards from the newest ID.
func (r *readTx) Threads(limit int) ([]core.Thread, error) {
	var out []core.Thread
	c := r.bucket(bktThreads).Cursor()
	for k, v := c.Last(); k != nil && !full(len(out), limit); k, v = c.Prev() {
		var t core.Thread
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("thread %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, t)
	}
	return out, nil
}

func (r *readTx) Message(id core.MessageID) (core.Message, error) {
	var m core.Message
	what := fmt.Sprintf("message %d", id)
	th := r.bucket(bktMessageThread).Get(u64(uint64(id)))
	if len(th) != 8 {
		return m, fmt.Errorf("%s: %w", what, core.ErrNotFound)
	}
	err := r.get(bktMessages, pairKey(decodeU64(th), uint64(id)), &m, what)
	return m, err
}

// Messages seeks thread BE + (after+1) BE and walks forward within the thread prefix.
func (r *readTx) Messages(thread core.ThreadID, after core.MessageID, limit int) ([]core.Message, error) {
	prefix := u64(uint64(thread))
	var out []core.Message
	c := r.bucket(bktMessages).Cursor()
	for k, v := c.Seek(pairKey(uint64(thread), uint64(after)+1)); k != nil && bytes.HasPrefix(k, prefix) && !full(len(out), limit); k, v = c.Next() {
		m, err := decodeMessage(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// MessagesBefore seeks thread BE + before BE (or the end of the thread prefix) and
// walks backwards within the prefix.
func (r *readTx) MessagesBefore(thread core.ThreadID, before core.MessageID, limit int) ([]core.Message, error) {
	prefix := u64(uint64(thread))
	var out []core.Message
	c := r.bucket(bktMessages).Cursor()
	var k, v []byte
	if before == 0 {
		k, v = seekLastWithPrefix(c, prefix)
	} else {
		k, v = c.Seek(pairKey(uint64(thread), uint64(before)))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix) && !full(len(out), limit); k, v = c.Prev() {
		m, err := decodeMessage(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// CountMessages walks the thread's key prefix without decoding values.
func (r *readTx) CountMessages(thread core.ThreadID) (int, error) {
	prefix := u64(uint64(thread))
	n := 0
	c := r.bucket(bktMessages).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n, nil
}

func (r *readTx) Item(id core.ItemID) (core.InboxItem, error) {
	var it core.InboxItem
	err := r.get(bktItems, u64(uint64(id)), &it, fmt.Sprintf("item %d", id))
	return it, err
}

// NextQueued seeks the actor's prefix in the queue index and walks forward only while
// skip returns true; nil skip takes the first.
func (r *readTx) NextQueued(actor core.ActorID, skip func(core.InboxItem) bool) (core.InboxItem, error) {
	prefix := prefixKey(string(actor))
	c := r.bucket(bktQueue).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		it, err := r.Item(core.ItemID(decodeU64(k[len(prefix):])))
		if err != nil {
			return core.InboxItem{}, fmt.Errorf("queue index of %q: %w", actor, err)
		}
		if skip == nil || !skip(it) {
			return it, nil
		}
	}
	return core.InboxItem{}, fmt.Errorf("next queued item of %q: %w", actor, core.ErrNotFound)
}

// QueuedInThread walks the (actor, thread) prefix of the queue_thread index.
func (r *readTx) QueuedInThread(actor core.ActorID, thread core.ThreadID) ([]core.InboxItem, error) {
	prefix := queueThreadPrefix(actor, thread)
	var out []core.InboxItem
	c := r.bucket(bktQueueThread).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		it, err := r.Item(core.ItemID(decodeU64(k[len(prefix):])))
		if err != nil {
			return nil, fmt.Errorf("queue index of %q in thread %d: %w", actor, thread, err)
		}
		out = append(out, it)
	}
	return out, nil
}

// ItemsByStatus walks the item_status index for queued and processing, and scans the
// items bucket for any other status.
func (r *readTx) ItemsByStatus(status core.ItemStatus) ([]core.InboxItem, error) {
	var out []core.InboxItem
	if !indexedItemStatus(status) {
		err := r.bucket(bktItems).ForEach(func(k, v []byte) error {
			var it core.InboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return fmt.Errorf("item %d: decode: %w", decodeU64(k), err)
			}
			if it.Status == status {
				out = append(out, it)
			}
			return nil
		})
		return out, err
	}
	prefix := prefixKey(string(status))
	c := r.bucket(bktItemStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		it, err := r.Item(core.ItemID(decodeU64(k[len(prefix):])))
		if err != nil {
			return nil, fmt.Errorf("status index %q: %w", status, err)
		}
		out = append(out, it)
	}
	return out, nil
}

// CountQueued reads the queued counter kept in meta (O(1)).
func (r *readTx) CountQueued() (int, error) {
	v := r.bucket(bktMeta).Get(keyQueuedCount)
	if v == nil {
		return 0, nil
	}
	return int(decodeU64(v)), nil
}

// Run decodes the runs record and adds the checkpoint from run_checkpoints.
func (r *readTx) Run(id core.RunID) (core.Run, error) {
	key := u64(uint64(id))
	v := r.bucket(bktRuns).Get(key)
	if v == nil {
		return core.Run{}, fmt.Errorf("run %d: %w", id, core.ErrNotFound)
	}
	return r.decodeRun(key, v)
}

// RunsByStatus walks the run_status index for non-terminal statuses and scans the
// runs bucket for terminal ones.
func (r *readTx) RunsByStatus(status core.RunStatus) ([]core.Run, error) {
	var out []core.Run
	if !indexedRunStatus(status) {
		err := r.bucket(bktRuns).ForEach(func(k, v []byte) error {
			var run core.Run
			if err := json.Unmarshal(v, &run); err != nil {
				return fmt.Errorf("run %d: decode: %w", decodeU64(k), err)
			}
			if run.Status == status {
				out = append(out, r.withCheckpoint(k, run))
			}
			return nil
		})
		return out, err
	}
	prefix := prefixKey(string(status))
	c := r.bucket(bktRunStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		run, err := r.Run(core.RunID(decodeU64(k[len(prefix):])))
		if err != nil {
			return nil, fmt.Errorf("status index %q: %w", status, err)
		}
		out = append(out, run)
	}
	return out, nil
}

// RunEvents walks the run's prefix of run_events, in Seq order. A run without events
// (or an unknown run) yields an empty list.
func (r *readTx) RunEvents(run core.RunID) ([]core.RunEvent, error) {
	prefix := u64(uint64(run))
	var out []core.RunEvent
	c := r.bucket(bktRunEvents).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var e core.RunEvent
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("run %d event %d: decode: %w", run, decodeU64(k[8:]), err)
		}
		out = append(out, e)
	}
	return out, nil
}

func (r *readTx) Outbox(id core.OutboxID) (core.OutboxEntry, error) {
	var o core.OutboxEntry
	err := r.get(bktOutbox, u64(uint64(id)), &o, fmt.Sprintf("outbox %d", id))
	return o, err
}

// PendingOutbox walks the outbox_pending index from after+1.
func (r *readTx) PendingOutbox(after core.OutboxID, limit int) ([]core.OutboxEntry, error) {
	var out []core.OutboxEntry
	c := r.bucket(bktOutboxPending).Cursor()
	for k, _ := c.Seek(u64(uint64(after) + 1)); k != nil && !full(len(out), limit); k, _ = c.Next() {
		o, err := r.Outbox(core.OutboxID(decodeU64(k)))
		if err != nil {
			return nil, fmt.Errorf("pending outbox index: %w", err)
		}
		out = append(out, o)
	}
	return out, nil
}

func (r *readTx) Seen(key string) (core.MessageID, error) {
	var v []byte
	if key != "" {
		v = r.bucket(bktSeen).Get([]byte(key))
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("dedup key %q: %w", key, core.ErrNotFound)
	}
	return core.MessageID(decodeU64(v)), nil
}

// Todo returns nil, nil when no list is saved for (bot, thread).
func (r *readTx) Todo(bot core.ActorID, thread core.ThreadID) ([]core.TodoItem, error) {
	v := r.bucket(bktTodos).Get(todoKey(bot, thread))
	if v == nil {
		return nil, nil
	}
	var items []core.TodoItem
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, fmt.Errorf("todo of %q in thread %d: decode: %w", bot, thread, err)
	}
	return items, nil
}

func (r *readTx) Activities(after uint64, limit int) ([]core.Activity, error) {
	var out []core.Activity
	c := r.bucket(bktActivity).Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil && !full(len(out), limit); k, v = c.Next() {
		var a core.Activity
		if err := json.Unmarshal(v, &a); err != nil {
			return nil, fmt.Errorf("activity %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Cursor returns "" and no error for an unset name.
func (r *readTx) Cursor(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	return string(r.bucket(bktCursors).Get([]byte(name))), nil
}

// full reports whether a result of n entries has reached limit; limit <= 0 is no limit.
func full(n, limit int) bool { return limit > 0 && n >= limit }

func decodeMessage(k, v []byte) (core.Message, error) {
	var m core.Message
	if err := json.Unmarshal(v, &m); err != nil {
		return m, fmt.Errorf("message %d: decode: %w", decodeU64(k[8:]), err)
	}
	return m, nil
}

// seekLastWithPrefix positions c on the last key with the 8-byte prefix, if any.
func seekLastWithPrefix(c *bbolt.Cursor, prefix []byte) ([]byte, []byte) {
	next := decodeU64(prefix) + 1
	if next == 0 {
		return c.Last()
	}
	k, _ := c.Seek(u64(next))
	if k == nil {
		return c.Last()
	}
	return c.Prev()
}
