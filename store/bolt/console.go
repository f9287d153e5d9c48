package bolt

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// Reads for the operator console (DESIGN.md §10): every listing is a cursor seek
// on a sequence-keyed bucket, so a page costs its own size, not the store's.

// logRunEvent appends e's key to run_event_log under the next position.
func (w *writeTx) logRunEvent(e core.RunEvent) error {
	b := w.bucket(bktRunEventLog)
	pos, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(u64(pos), pairKey(uint64(e.Run), e.Seq))
}

// ThreadsBefore walks the threads bucket backwards from before-1 (or the newest).
func (r *readTx) ThreadsBefore(before core.ThreadID, limit int) ([]core.Thread, error) {
	var out []core.Thread
	err := walkBack(r.bucket(bktThreads).Cursor(), uint64(before), limit, func(k, v []byte) error {
		var t core.Thread
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("thread %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// RunsBefore walks the runs bucket backwards from before-1 (or the newest).
func (r *readTx) RunsBefore(before core.RunID, limit int) ([]core.Run, error) {
	var out []core.Run
	err := walkBack(r.bucket(bktRuns).Cursor(), uint64(before), limit, func(k, v []byte) error {
		run, err := r.decodeRun(k, v)
		if err == nil {
			out = append(out, run)
		}
		return err
	})
	return out, err
}

// ActivitiesBefore walks the activity bucket backwards from before-1 (or the newest).
func (r *readTx) ActivitiesBefore(before uint64, limit int) ([]core.Activity, error) {
	var out []core.Activity
	err := walkBack(r.bucket(bktActivity).Cursor(), before, limit, func(k, v []byte) error {
		var a core.Activity
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("activity %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// MessagesSince walks message_thread (MessageID BE -> ThreadID BE) forward from
// after+1 and reads each message under its thread.
func (r *readTx) MessagesSince(after core.MessageID, limit int) ([]core.Message, error) {
	var out []core.Message
	c := r.bucket(bktMessageThread).Cursor()
	for k, v := c.Seek(u64(uint64(after) + 1)); k != nil && !full(len(out), limit); k, v = c.Next() {
		if len(v) != 8 {
			return nil, fmt.Errorf("message index %d: bad thread", decodeU64(k))
		}
		var m core.Message
		if err := r.get(bktMessages, pairKey(decodeU64(v), decodeU64(k)), &m, fmt.Sprintf("message %d", decodeU64(k))); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// RunEventsSince walks run_event_log forward from after+1; an entry whose event is
// gone (pruned) is skipped.
func (r *readTx) RunEventsSince(after uint64, limit int) ([]core.LoggedRunEvent, error) {
	var out []core.LoggedRunEvent
	events := r.bucket(bktRunEvents)
	c := r.bucket(bktRunEventLog).Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil && !full(len(out), limit); k, v = c.Next() {
		data := events.Get(v)
		if data == nil {
			continue
		}
		e := core.LoggedRunEvent{Pos: decodeU64(k)}
		if err := json.Unmarshal(data, &e.RunEvent); err != nil {
			return nil, fmt.Errorf("run event at %d: decode: %w", e.Pos, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Heads reads the buckets' sequences: each is the last ID NextSequence assigned in
// a committed transaction.
func (r *readTx) Heads() (core.LogHeads, error) {
	return core.LogHeads{
		Activity: r.bucket(bktActivity).Sequence(),
		Message:  core.MessageID(r.bucket(bktMessages).Sequence()),
		RunEvent: r.bucket(bktRunEventLog).Sequence(),
	}, nil
}

// walkBack calls fn for up to limit entries of an 8-byte-keyed bucket with keys
// < before (before 0: from the last key), newest first.
func walkBack(c *bbolt.Cursor, before uint64, limit int, fn func(k, v []byte) error) error {
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else {
		k, v = c.Seek(u64(before))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for n := 0; k != nil && !full(n, limit); k, v = c.Prev() {
		if err := fn(k, v); err != nil {
			return err
		}
		n++
	}
	return nil
}

// runEventLog checks that every run event has exactly one run_event_log entry
// and that every entry names a stored event: retention deletes an event and its
// entry in one transaction (an entry left without its event by an earlier
// version is removed by the next prune pass).
func (v *verifier) runEventLog() {
	seen := map[string]int{}
	events := v.tx.Bucket(bktRunEvents)
	_ = v.tx.Bucket(bktRunEventLog).ForEach(func(k, val []byte) error {
		seen[string(val)]++
		if events.Get(val) == nil && len(val) == 16 {
			v.fail("run_event_log: entry %d names run %d event %d, which is gone", decodeU64(k), decodeU64(val[:8]), decodeU64(val[8:]))
		}
		return nil
	})
	_ = events.ForEach(func(k, _ []byte) error {
		if n := seen[string(k)]; n != 1 {
			v.fail("run_event_log: run %d event %d listed %d times, want once", decodeU64(k[:8]), decodeU64(k[8:]), n)
		}
		return nil
	})
}
