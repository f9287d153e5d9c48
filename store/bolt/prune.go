package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"openbot/core"
)

var _ core.Pruning = (*Store)(nil)

// Resume keys of the unordered prune walks, in the meta bucket: where the last
// transaction stopped, so the next one goes on from there.
var (
	keyPruneSeen = []byte("prune_seen_after")
	keyPruneIdle = []byte("prune_idle_after")
	keyPruneLog  = []byte("prune_log_after")
)

// pruneScan is how many keys one Prune transaction may examine per record it
// may delete, so a transaction stays short even when little is deletable.
const pruneScan = 4

// Prune implements core.Pruning: one Update that deletes at most limit records
// of kind older than before, examining at most pruneScan*limit keys. Activity
// and outbox entries are walked oldest first from the start of their bucket (IDs
// grow with time, so the walk stops at the first record that is new enough); run
// events (through run_event_log), dedup keys and idle threads are walked from
// where the last call stopped, kept in the meta bucket, and start over at the end.
func (s *Store) Prune(ctx context.Context, kind core.PruneKind, before time.Time, limit int) (int, bool, error) {
	if limit <= 0 {
		return 0, false, fmt.Errorf("bolt: prune %s: limit must be positive", kind)
	}
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	var n int
	var more bool
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := pruner{tx: tx, before: before, limit: limit, budget: pruneScan * limit}
		var err error
		switch kind {
		case core.PruneRunEvents:
			err = p.runEvents()
		case core.PruneActivity:
			err = p.activity()
		case core.PruneOutbox:
			err = p.outbox()
		case core.PruneDedup:
			err = p.seen()
		case core.PruneIdleMessages:
			err = p.idleThreads()
		default:
			return fmt.Errorf("unknown prune kind %q", kind)
		}
		n, more = p.deleted, p.more
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("bolt: prune %s: %w", kind, err)
	}
	return n, more, nil
}

type pruner struct {
	tx      *bbolt.Tx
	before  time.Time
	limit   int
	budget  int // keys left to examine
	deleted int
	more    bool
}

func (p *pruner) del(b *bbolt.Bucket, keys [][]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	p.deleted += len(keys)
	return nil
}

func terminalRun(s core.RunStatus) bool {
	return s == core.RunCompleted || s == core.RunFailed || s == core.RunCancelled
}

// runEvents deletes the events of runs that ended before the cutoff together
// with their run_event_log entries, in the same transaction, so the log never
// points at a pruned event (Verify checks it). It walks run_event_log from where
// the last call stopped (the log is in append order, so the walk may stop at the
// first event of a run created at or after the cutoff: every later entry was
// appended after the cutoff, by a run that had not ended before it). An entry
// whose event is already gone, left by an earlier version, is deleted too.
func (p *pruner) runEvents() error {
	events, runs, logb := p.tx.Bucket(bktRunEvents), p.tx.Bucket(bktRuns), p.tx.Bucket(bktRunEventLog)
	meta := p.tx.Bucket(bktMeta)
	c := logb.Cursor()
	k, v := c.First()
	if after := meta.Get(keyPruneLog); after != nil {
		k, v = c.Seek(u64(decodeU64(after) + 1))
	}
	keep := map[string]bool{} // run key -> its events stay
	var doomed, orphans [][]byte
	var last []byte
	stopped := false
	for ; k != nil; k, v = c.Next() {
		if p.fullWith(len(doomed)) {
			break
		}
		p.budget--
		if len(v) != 16 {
			return fmt.Errorf("run_event_log %d: bad value", decodeU64(k))
		}
		if events.Get(v) == nil {
			orphans = append(orphans, append([]byte{}, k...))
			last = append(last[:0], k...)
			continue
		}
		runKey := string(v[:8])
		kept, known := keep[runKey]
		if !known {
			if raw := runs.Get(v[:8]); raw != nil {
				var r core.Run
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("run %x: %w", v[:8], err)
				}
				if !r.Created.Before(p.before) {
					stopped = true
					break
				}
				end := r.Ended
				if end.IsZero() {
					end = r.Created
				}
				kept = !terminalRun(r.Status) || !end.Before(p.before)
			}
			keep[runKey] = kept
		}
		last = append(last[:0], k...)
		if !kept {
			doomed = append(doomed, append([]byte{}, v...))
			orphans = append(orphans, append([]byte{}, k...))
		}
	}
	if err := p.resume(keyPruneLog, k == nil || stopped, last); err != nil {
		return err
	}
	for _, lk := range orphans {
		if err := logb.Delete(lk); err != nil {
			return err
		}
	}
	return p.del(events, doomed)
}

// fullWith is full counting n records collected but not yet deleted.
func (p *pruner) fullWith(n int) bool {
	if p.deleted+n >= p.limit || p.budget <= 0 {
		p.more = true
		return true
	}
	return false
}

// activity deletes the oldest activity lines while they are older than the cutoff.
func (p *pruner) activity() error {
	return pruneOldest(p, bktActivity, func(a core.Activity) time.Time { return a.At }, nil)
}

// outbox deletes finished (delivered, failed) entries created before the cutoff.
func (p *pruner) outbox() error {
	pending := p.tx.Bucket(bktOutboxPending)
	return pruneOldest(p, bktOutbox, func(o core.OutboxEntry) time.Time { return o.Created },
		func(k []byte, o core.OutboxEntry) bool {
			return o.Status != core.OutboxPending && pending.Get(k) == nil
		})
}

// pruneOldest walks bucket name from its oldest key while p has budget and the
// records (T, dated by at) are older than the cutoff, and deletes those that
// doom (nil: all) accepts.
func pruneOldest[T any](p *pruner, name []byte, at func(T) time.Time, doom func(k []byte, v T) bool) error {
	b := p.tx.Bucket(name)
	c := b.Cursor()
	var doomed [][]byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if p.fullWith(len(doomed)) {
			break
		}
		p.budget--
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%s %x: %w", name, k, err)
		}
		if !at(rec).Before(p.before) {
			break
		}
		if doom == nil || doom(k, rec) {
			doomed = append(doomed, append([]byte{}, k...))
		}
	}
	return p.del(b, doomed)
}

// messageTime is the Created time of message id, false when it is gone.
func (p *pruner) messageTime(id []byte) (time.Time, bool) {
	th := p.tx.Bucket(bktMessageThread).Get(id)
	if len(th) != 8 {
		return time.Time{}, false
	}
	raw := p.tx.Bucket(bktMessages).Get(append(append([]byte{}, th...), id...))
	if raw == nil {
		return time.Time{}, false
	}
	var m struct {
		Created time.Time `json:"created"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return time.Time{}, false
	}
	return m.Created, true
}

// seen deletes dedup keys whose message is older than the cutoff or gone,
// walking the keys from where the last call stopped.
func (p *pruner) seen() error {
	b, meta := p.tx.Bucket(bktSeen), p.tx.Bucket(bktMeta)
	c := b.Cursor()
	var doomed [][]byte
	after := meta.Get(keyPruneSeen)
	k, v := c.First()
	if after != nil {
		k, v = c.Seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	var last []byte
	for ; k != nil; k, v = c.Next() {
		if p.fullWith(len(doomed)) {
			break
		}
		p.budget--
		last = append(last[:0], k...)
		at, ok := p.messageTime(v)
		if !ok || at.Before(p.before) {
			doomed = append(doomed, append([]byte{}, k...))
		}
	}
	if err := p.resume(keyPruneSeen, k == nil, last); err != nil {
		return err
	}
	return p.del(b, doomed)
}

// resume records where an unordered walk stopped, or clears it at the end.
func (p *pruner) resume(key []byte, atEnd bool, last []byte) error {
	meta := p.tx.Bucket(bktMeta)
	if atEnd || last == nil {
		p.more = p.more && !atEnd
		return meta.Delete(key)
	}
	return meta.Put(key, append([]byte{}, last...))
}

// idleThreads deletes the messages of threads whose newest message is older
// than the cutoff and that have no queued or processing item and no unfinished
// run, walking threads from where the last call stopped.
func (p *pruner) idleThreads() error {
	busy, err := p.busyThreads()
	if err != nil {
		return err
	}
	threads, msgs, byID := p.tx.Bucket(bktThreads), p.tx.Bucket(bktMessages), p.tx.Bucket(bktMessageThread)
	meta := p.tx.Bucket(bktMeta)
	tc := threads.Cursor()
	k, _ := tc.First()
	if after := meta.Get(keyPruneIdle); after != nil {
		k, _ = tc.Seek(u64(decodeU64(after) + 1))
	}
	var doomed [][]byte
	var last []byte
	for ; k != nil; k, _ = tc.Next() {
		if p.fullWith(len(doomed)) {
			break
		}
		p.budget--
		id := decodeU64(k)
		if busy[id] {
			last = append(last[:0], k...)
			continue
		}
		mc := msgs.Cursor()
		lk, lv := mc.Seek(u64(id + 1))
		if lk == nil {
			lk, lv = mc.Last()
		} else {
			lk, lv = mc.Prev()
		}
		if lk == nil || !bytes.HasPrefix(lk, k) {
			last = append(last[:0], k...)
			continue // no messages
		}
		var m struct {
			Created time.Time `json:"created"`
		}
		if err := json.Unmarshal(lv, &m); err != nil {
			return fmt.Errorf("message %x: %w", lk, err)
		}
		if !m.Created.Before(p.before) {
			last = append(last[:0], k...)
			continue
		}
		finished := true
		for mk, _ := mc.Seek(k); mk != nil && bytes.HasPrefix(mk, k); mk, _ = mc.Next() {
			if p.fullWith(len(doomed)) {
				finished = false
				break
			}
			p.budget--
			doomed = append(doomed, append([]byte{}, mk...))
		}
		if !finished {
			break // the same thread goes on in the next call
		}
		last = append(last[:0], k...)
	}
	if err := p.resume(keyPruneIdle, k == nil, last); err != nil {
		return err
	}
	for _, mk := range doomed {
		if err := byID.Delete(mk[8:]); err != nil {
			return err
		}
	}
	return p.del(msgs, doomed)
}

// busyThreads are the threads with queued or processing items or with runs
// that are not finished, read through the status indexes.
func (p *pruner) busyThreads() (map[uint64]bool, error) {
	busy := map[uint64]bool{}
	items, runs := p.tx.Bucket(bktItems), p.tx.Bucket(bktRuns)
	err := p.tx.Bucket(bktItemStatus).ForEach(func(k, _ []byte) error {
		var it core.InboxItem
		if raw := items.Get(k[len(k)-8:]); raw != nil {
			if err := json.Unmarshal(raw, &it); err != nil {
				return err
			}
			busy[uint64(it.Thread)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = p.tx.Bucket(bktRunStatus).ForEach(func(k, _ []byte) error {
		var r core.Run
		if raw := runs.Get(k[len(k)-8:]); raw != nil {
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			busy[uint64(r.Thread)] = true
		}
		return nil
	})
	return busy, err
}
