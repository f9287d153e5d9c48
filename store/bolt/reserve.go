package bolt

import (
	"fmt"
	"sync"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// ids assigns the IDs of threads, messages, items and runs, and reserves them
// ahead of the transaction that inserts them (core.IDReserver, speculative
// ingest, DESIGN.md §7). Every such ID comes from here, in memory: the file is
// used by one process only (its lock), so the counter is the bucket's
// sequence, loaded at Open and stored back (SetSequence) by each transaction
// that assigns or inserts an ID. Each write transaction takes the counter back
// to what is committed or reserved (sync), so the IDs of one that rolled back
// are handed out again, as bbolt's own sequences would be.
//
// A reserved ID may be inserted after higher IDs were committed. Message IDs
// are the cursor of the console's live stream and of the message index
// (MessagesSince, Heads), so those reads stop below the lowest message ID
// still reserved and not committed: a reader never passes an ID that may still
// appear. For that the reader takes the reservations' low mark, begins its
// bbolt transaction, and begins again if a reservation was made in between
// (gen); a reservation is open until the transaction that inserts it commits
// (bbolt's OnCommit) or it is released unused. No lock is held across the
// begin: a read transaction that waits for the writer's remap while holding
// one would deadlock against a speculation that reserves inside its own read.
type ids struct {
	mu   sync.Mutex
	seq  [idKinds]uint64              // by kind: the last ID assigned or reserved
	open [idKinds]map[uint64]struct{} // by kind: reservations neither committed nor released
	gen  uint64                       // message reservations made so far
}

const idKinds = int(core.IDRun) + 1

// idBucket is the bucket whose records each kind's IDs key.
var idBucket = [idKinds][]byte{
	core.IDThread:  bktThreads,
	core.IDMessage: bktMessages,
	core.IDItem:    bktItems,
	core.IDRun:     bktRuns,
}

func validKind(kind core.IDKind) bool { return kind >= core.IDThread && kind <= core.IDRun }

// kindOf is the kind of IDs bucket name assigns, or 0 for a bucket whose
// sequence its own NextSequence assigns.
func kindOf(name []byte) core.IDKind {
	for k, b := range idBucket {
		if b != nil && string(b) == string(name) {
			return core.IDKind(k)
		}
	}
	return 0
}

// load reads the counters from the file (at Open, after the upgrade).
func (a *ids) load(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		for k, name := range idBucket {
			if name != nil {
				a.seq[k] = tx.Bucket(name).Sequence()
			}
		}
		return nil
	})
}

// sync, in the writable transaction btx (the only writer), sets each counter to
// the highest ID committed or assigned in btx, or reserved and still open:
// what a transaction that rolled back assigned is free again.
func (a *ids) sync(btx *bbolt.Tx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, name := range idBucket {
		if name == nil {
			continue
		}
		seq := btx.Bucket(name).Sequence()
		for id := range a.open[k] {
			seq = max(seq, id)
		}
		a.seq[k] = seq
	}
}

// next assigns the next ID of kind in the writable transaction btx and stores
// the counter in its bucket.
func (a *ids) next(btx *bbolt.Tx, kind core.IDKind) (uint64, error) {
	b := btx.Bucket(idBucket[kind])
	a.mu.Lock()
	id := max(a.seq[kind], b.Sequence()) + 1
	a.seq[kind] = id
	a.mu.Unlock()
	return id, b.SetSequence(id)
}

// insert reports whether id of kind is reserved, so that a Put may insert a
// record with it in btx; the reservation closes when btx commits.
func (a *ids) insert(btx *bbolt.Tx, kind core.IDKind, id uint64) (bool, error) {
	a.mu.Lock()
	_, ok := a.open[kind][id]
	a.mu.Unlock()
	if !ok {
		return false, nil
	}
	btx.OnCommit(func() { _ = a.close(kind, id) })
	if b := btx.Bucket(idBucket[kind]); id > b.Sequence() {
		return true, b.SetSequence(id)
	}
	return true, nil
}

// close ends reservations of kind and reports how many were open.
func (a *ids) close(kind core.IDKind, ids ...uint64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := a.open[kind][id]; ok {
			delete(a.open[kind], id)
			n++
		}
	}
	return n
}

// lowMessage is the low mark of the open message reservations (0: none) and
// how many message reservations were made so far.
func (a *ids) lowMessage() (core.MessageID, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var low uint64
	for id := range a.open[core.IDMessage] {
		if low == 0 || id < low {
			low = id
		}
	}
	return core.MessageID(low), a.gen
}

// begin takes the low mark of the open message reservations and begins a read
// transaction (readTx.msgBelow), with no reservation made in between: a
// reservation made meanwhile is below IDs the transaction may see, so it
// begins again (a window of microseconds, so seldom more than once).
func (a *ids) begin(db *bbolt.DB) (*bbolt.Tx, core.MessageID, error) {
	for {
		low, gen := a.lowMessage()
		btx, err := db.Begin(false)
		if err != nil {
			return nil, 0, err
		}
		a.mu.Lock()
		same := a.gen == gen
		a.mu.Unlock()
		if same {
			return btx, low, nil
		}
		_ = btx.Rollback()
	}
}

// ReserveID implements core.IDReserver.
func (s *Store) ReserveID(kind core.IDKind) (uint64, error) {
	if !validKind(kind) {
		return 0, fmt.Errorf("bolt: no reservable ids of kind %d", kind)
	}
	if s.closed.Load() {
		return 0, fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	a := &s.ids
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == core.IDMessage {
		a.gen++
	}
	a.seq[kind]++
	if a.open[kind] == nil {
		a.open[kind] = map[uint64]struct{}{}
	}
	a.open[kind][a.seq[kind]] = struct{}{}
	return a.seq[kind], nil
}

// ReleaseIDs implements core.IDReserver. The next write transaction's sync
// hands the IDs released unused out again when nothing above them was stored,
// so a speculation that started nothing leaves no gap in the numbers people
// see (threads are numbered in the console).
func (s *Store) ReleaseIDs(kind core.IDKind, ids ...uint64) int {
	if !validKind(kind) {
		return 0
	}
	return s.ids.close(kind, ids...)
}

var _ core.IDReserver = (*Store)(nil)
