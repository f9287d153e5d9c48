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
// that assigns or inserts an ID. A transaction that rolls back leaves a gap.
//
// Commit order: a reserved ID is only inserted by a transaction that commits
// before any other transaction has assigned an ID of its kind since the
// reservation. Each reservation remembers the first transaction (by bbolt txid)
// that assigned such an ID after it, and lapses when a second one does: of two
// writable transactions with different txids, the lower one ended (committed
// or rolled back) before the higher one began, so an inserting transaction with
// another txid than the one remembered commits after a transaction that may
// have committed a higher ID. A rolled-back transaction's txid is reused by the
// next one, so it is not held against it.
type ids struct {
	mu  sync.Mutex
	seq [idKinds]uint64                  // by kind: the last ID assigned or reserved
	res [idKinds]map[uint64]*reservation // by kind: reservations not yet released
}

const idKinds = int(core.IDRun) + 1

// reservation is one reserved ID's standing.
type reservation struct {
	after  int  // txid of the first transaction that assigned an ID of the kind after it; 0 none
	lapsed bool // a second transaction did
}

// saw records that transaction txid assigned (or inserted) an ID of the kind.
func (r *reservation) saw(txid int) {
	switch {
	case r.after == 0:
		r.after = txid
	case r.after != txid:
		r.lapsed = true
	}
}

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

// next assigns the next ID of kind in the writable transaction btx and stores
// the counter in its bucket.
func (a *ids) next(btx *bbolt.Tx, kind core.IDKind) (uint64, error) {
	b := btx.Bucket(idBucket[kind])
	a.mu.Lock()
	id := max(a.seq[kind], b.Sequence()) + 1
	a.seq[kind] = id
	for _, r := range a.res[kind] {
		r.saw(btx.ID())
	}
	a.mu.Unlock()
	return id, b.SetSequence(id)
}

// insert reports whether id of kind is reserved, so that a Put may insert a
// record with it in btx; it fails with core.ErrReservationLapsed when the
// reservation is no longer in commit order.
func (a *ids) insert(btx *bbolt.Tx, kind core.IDKind, id uint64) (bool, error) {
	a.mu.Lock()
	r := a.res[kind][id]
	if r == nil {
		a.mu.Unlock()
		return false, nil
	}
	lapsed := r.lapsed || (r.after != 0 && r.after != btx.ID())
	if !lapsed {
		// Inserting id is assigning it, for the reservations at or below it:
		// another transaction that inserts one of them lapses it (this one may
		// still roll back, and its txid is then reused by the next).
		for o, ro := range a.res[kind] {
			if o <= id {
				ro.saw(btx.ID())
			}
		}
	}
	a.mu.Unlock()
	if lapsed {
		return true, fmt.Errorf("%s id %d: %w", idBucket[kind], id, core.ErrReservationLapsed)
	}
	b := btx.Bucket(idBucket[kind])
	if id > b.Sequence() {
		return true, b.SetSequence(id)
	}
	return true, nil
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
	a.seq[kind]++
	if a.res[kind] == nil {
		a.res[kind] = map[uint64]*reservation{}
	}
	a.res[kind][a.seq[kind]] = &reservation{}
	return a.seq[kind], nil
}

// ReleaseIDs implements core.IDReserver.
func (s *Store) ReleaseIDs(kind core.IDKind, ids ...uint64) {
	if !validKind(kind) {
		return
	}
	a := &s.ids
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		delete(a.res[kind], id)
	}
}

var _ core.IDReserver = (*Store)(nil)
