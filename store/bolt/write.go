package bolt

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"openbot/core"
	"openbot/store/check"
)

// writeTx implements core.Tx. Put methods with a non-zero ID read the stored record
// first, so that index entries of its old status, actor or thread are removed before
// those of the new value are written, all in the same transaction. A non-zero ID that
// was never assigned is an error wrapping core.ErrNotFound (IDs are store-assigned).
type writeTx struct {
	readTx
}

var _ core.Tx = (*writeTx)(nil)

func (w *writeTx) put(name, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", name, err)
	}
	return w.bucket(name).Put(key, data)
}

// nextID assigns the next sequence of bucket name.
func (w *writeTx) nextID(name []byte) (uint64, error) {
	id, err := w.bucket(name).NextSequence()
	if err != nil {
		return 0, fmt.Errorf("next id in %s: %w", name, err)
	}
	return id, nil
}

// PutActor upserts by ID; the system actor (empty ID) cannot be stored.
func (w *writeTx) PutActor(a core.Actor) error {
	if err := check.Actor(a); err != nil {
		return err
	}
	return w.put(bktActors, []byte(a.ID), a)
}

// PutBot upserts by handle.
func (w *writeTx) PutBot(b core.BotProfile) error {
	if err := check.Bot(b); err != nil {
		return err
	}
	return w.put(bktBots, []byte(b.Handle), b)
}

// PutThread stores a thread. It does not bind Thread.Key; BindThreadKey does.
func (w *writeTx) PutThread(t core.Thread) (core.Thread, error) {
	if t.ID == 0 {
		id, err := w.nextID(bktThreads)
		if err != nil {
			return t, err
		}
		t.ID = core.ThreadID(id)
	} else if err := w.threadExists(t.ID); err != nil {
		return t, err
	}
	return t, w.put(bktThreads, u64(uint64(t.ID)), t)
}

// threadExists is a key lookup: threads have no indexes to maintain, so the old
// record need not be decoded.
func (w *writeTx) threadExists(id core.ThreadID) error {
	if w.bucket(bktThreads).Get(u64(uint64(id))) == nil {
		return fmt.Errorf("thread %d: %w", id, core.ErrNotFound)
	}
	return nil
}

// BindThreadKey fails with ErrNotFound when the thread does not exist.
func (w *writeTx) BindThreadKey(key string, id core.ThreadID) error {
	if err := check.ThreadKey(key); err != nil {
		return err
	}
	if err := w.threadExists(id); err != nil {
		return err
	}
	return w.bucket(bktThreadKeys).Put([]byte(key), u64(uint64(id)))
}

// PutMessage stores a message under its thread; Thread must be non-zero.
func (w *writeTx) PutMessage(m core.Message) (core.Message, error) {
	if err := check.Message(m); err != nil {
		return m, err
	}
	if m.ID == 0 {
		id, err := w.nextID(bktMessages)
		if err != nil {
			return m, err
		}
		m.ID = core.MessageID(id)
	} else {
		old, err := w.Message(m.ID)
		if err != nil {
			return m, err
		}
		if old.Thread != m.Thread {
			if err := w.bucket(bktMessages).Delete(pairKey(uint64(old.Thread), uint64(m.ID))); err != nil {
				return m, err
			}
		}
	}
	if err := w.bucket(bktMessageThread).Put(u64(uint64(m.ID)), u64(uint64(m.Thread))); err != nil {
		return m, err
	}
	return m, w.put(bktMessages, pairKey(uint64(m.Thread), uint64(m.ID)), m)
}

// PutItem stores an inbox item and moves its queue, queue_thread and item_status
// index entries and the queued counter to match its status. Actor, Thread, Kind and
// Status must be set (seed invariant 1: every item belongs to a thread).
func (w *writeTx) PutItem(it core.InboxItem) (core.InboxItem, error) {
	if err := check.Item(it); err != nil {
		return it, err
	}
	var old *core.InboxItem
	if it.ID == 0 {
		id, err := w.nextID(bktItems)
		if err != nil {
			return it, err
		}
		it.ID = core.ItemID(id)
	} else {
		o, err := w.Item(it.ID)
		if err != nil {
			return it, err
		}
		old = &o
	}
	delta := 0
	if old != nil {
		if err := w.itemIndex(*old, false); err != nil {
			return it, err
		}
		if old.Status == core.ItemQueued {
			delta--
		}
	}
	if err := w.itemIndex(it, true); err != nil {
		return it, err
	}
	if it.Status == core.ItemQueued {
		delta++
	}
	if err := w.addQueued(delta); err != nil {
		return it, err
	}
	return it, w.put(bktItems, u64(uint64(it.ID)), it)
}

// itemIndex adds (add) or removes the index entries of it.
func (w *writeTx) itemIndex(it core.InboxItem, add bool) error {
	type entry struct {
		bucket []byte
		key    []byte
	}
	var entries []entry
	if it.Status == core.ItemQueued {
		entries = append(entries,
			entry{bktQueue, queueKey(it.Actor, it.ID)},
			entry{bktQueueThread, queueThreadKey(it.Actor, it.Thread, it.ID)})
	}
	if indexedItemStatus(it.Status) {
		entries = append(entries, entry{bktItemStatus, statusKey(string(it.Status), uint64(it.ID))})
	}
	for _, e := range entries {
		if err := setIndex(w.bucket(e.bucket), e.key, add); err != nil {
			return fmt.Errorf("index item %d in %s: %w", it.ID, e.bucket, err)
		}
	}
	return nil
}

func (w *writeTx) addQueued(delta int) error {
	if delta == 0 {
		return nil
	}
	meta := w.bucket(bktMeta)
	var n uint64
	if v := meta.Get(keyQueuedCount); v != nil {
		n = decodeU64(v)
	}
	if delta < 0 && n < uint64(-delta) {
		return fmt.Errorf("queued counter underflow (%d%+d)", n, delta)
	}
	return meta.Put(keyQueuedCount, u64(uint64(int64(n)+int64(delta))))
}

// PutRun stores a run and moves its run_status index entry: non-terminal statuses
// (queued, running, waiting_human) are indexed. Bot, Thread and Status must be set.
// The record is stored without its Checkpoint, which goes to run_checkpoints
// (checkpoint.go): it is deleted when empty, left alone when unchanged and must
// otherwise be valid JSON. Of the old record only its Status is decoded.
func (w *writeTx) PutRun(r core.Run) (core.Run, error) {
	if err := check.Run(r); err != nil {
		return r, err
	}
	var old runRecord
	if r.ID != 0 {
		v := w.bucket(bktRuns).Get(u64(uint64(r.ID)))
		if v == nil {
			return r, fmt.Errorf("run %d: %w", r.ID, core.ErrNotFound)
		}
		if err := json.Unmarshal(v, &old); err != nil {
			return r, fmt.Errorf("run %d: decode: %w", r.ID, err)
		}
	}
	writeCP, err := w.checkpointChanged(r.ID, r.Checkpoint)
	if err != nil {
		return r, err
	}
	if r.ID == 0 {
		id, err := w.nextID(bktRuns)
		if err != nil {
			return r, err
		}
		r.ID = core.RunID(id)
	}
	key := u64(uint64(r.ID))
	data, err := encodeRun(r)
	if err != nil {
		return r, err
	}
	if writeCP {
		if err := w.putCheckpoint(key, r.Checkpoint); err != nil {
			return r, err
		}
	}
	if indexedRunStatus(old.Status) {
		if err := w.bucket(bktRunStatus).Delete(statusKey(string(old.Status), uint64(r.ID))); err != nil {
			return r, err
		}
	}
	if indexedRunStatus(r.Status) {
		if err := w.bucket(bktRunStatus).Put(statusKey(string(r.Status), uint64(r.ID)), nil); err != nil {
			return r, err
		}
	}
	return r, w.bucket(bktRuns).Put(key, data)
}

// AppendRunEvent sets Seq to one past the run's last event (seek to the next run's
// prefix, step back) and stores it. The run must exist (a key lookup: its record
// is not decoded).
func (w *writeTx) AppendRunEvent(e core.RunEvent) (core.RunEvent, error) {
	if w.bucket(bktRuns).Get(u64(uint64(e.Run))) == nil {
		return e, fmt.Errorf("run %d: %w", e.Run, core.ErrNotFound)
	}
	c := w.bucket(bktRunEvents).Cursor()
	k, _ := seekLastWithPrefix(c, u64(uint64(e.Run)))
	e.Seq = 1
	if k != nil && decodeU64(k[:8]) == uint64(e.Run) {
		e.Seq = decodeU64(k[8:]) + 1
	}
	if err := w.logRunEvent(e); err != nil {
		return e, err
	}
	return e, w.put(bktRunEvents, pairKey(uint64(e.Run), e.Seq), e)
}

// PutOutbox stores an outbox entry; it is in the pending index exactly while its
// Status is pending. Status must be set.
func (w *writeTx) PutOutbox(o core.OutboxEntry) (core.OutboxEntry, error) {
	if err := check.Outbox(o); err != nil {
		return o, err
	}
	if o.ID == 0 {
		id, err := w.nextID(bktOutbox)
		if err != nil {
			return o, err
		}
		o.ID = core.OutboxID(id)
	} else if _, err := w.Outbox(o.ID); err != nil {
		return o, err
	}
	if err := setIndex(w.bucket(bktOutboxPending), u64(uint64(o.ID)), o.Status == core.OutboxPending); err != nil {
		return o, err
	}
	return o, w.put(bktOutbox, u64(uint64(o.ID)), o)
}

func (w *writeTx) MarkSeen(key string, m core.MessageID) error {
	if err := check.SeenKey(key); err != nil {
		return err
	}
	return w.bucket(bktSeen).Put([]byte(key), u64(uint64(m)))
}

// PutTodo replaces the list; an empty list deletes it (Todo then returns nil).
func (w *writeTx) PutTodo(bot core.ActorID, thread core.ThreadID, items []core.TodoItem) error {
	if err := check.TodoBot(bot); err != nil {
		return err
	}
	key := todoKey(bot, thread)
	if len(items) == 0 {
		return w.bucket(bktTodos).Delete(key)
	}
	return w.put(bktTodos, key, items)
}

// AppendActivity assigns the next Seq (NextSequence of the activity bucket).
func (w *writeTx) AppendActivity(a core.Activity) error {
	seq, err := w.nextID(bktActivity)
	if err != nil {
		return err
	}
	a.Seq = seq
	return w.put(bktActivity, u64(seq), a)
}

// SetCursor stores value under name; an empty value deletes it.
func (w *writeTx) SetCursor(name, value string) error {
	if err := check.Cursor(name, value); err != nil {
		return err
	}
	if value == "" {
		return w.bucket(bktCursors).Delete([]byte(name))
	}
	return w.bucket(bktCursors).Put([]byte(name), []byte(value))
}

func setIndex(b *bbolt.Bucket, key []byte, present bool) error {
	if present {
		return b.Put(key, nil)
	}
	return b.Delete(key)
}
