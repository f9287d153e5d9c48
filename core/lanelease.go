package core

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Outbox lane leases (DESIGN.md §4 "delivery lanes", §7, core/lease.go): with
// several processes sharing the store, each (account, conversation) lane is
// delivered by the one process holding its lease, so delivery order per
// conversation holds. A process takes the lease of a lane when its sweep finds a
// pending entry for it, keeps it while the lane lives (renewed with the runs'
// claims) and drops it when the lane is released after laneIdle. A process that
// dies stops renewing; once its lane leases lapse another process's sweep takes
// them. An entry sent but not yet marked delivered when its process died is sent
// again by the next holder: the documented send window.

// leaseLanes takes the leases of the lanes of page's entries that this process
// does not hold yet, in one transaction, and returns which lanes are this
// process's. Unshared, every lane is.
func (l *lanes) leaseLanes(ctx context.Context, page []OutboxEntry) func(laneKey) bool {
	if !l.e.cluster.shared {
		return func(laneKey) bool { return true }
	}
	got := map[laneKey]bool{}
	var want []laneKey
	now := l.e.clock.Now()
	l.mu.Lock()
	for _, o := range page {
		k := laneKey{o.Account, o.Conversation}
		if ln, ok := l.m[k]; ok && ln.leased() {
			got[k] = true
		} else if until, held := l.theirs[k]; held && now.Before(until) {
			continue // another process's lane until then: no write to learn it again
		} else if !got[k] && !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	l.mu.Unlock()
	if len(want) == 0 {
		return func(k laneKey) bool { return got[k] }
	}
	var taken []laneKey
	theirs := map[laneKey]time.Time{}
	err := l.e.store.Update(ctx, func(tx Tx) error {
		taken = nil
		clear(theirs)
		now := l.e.clock.Now()
		for _, k := range want {
			held, err := TakeLeaseTx(tx, LeaseKeyLane(k.account, k.conv), l.e.cluster.incarnation, now, l.e.cluster.leaseTTL)
			if errors.Is(err, ErrLeaseHeld) {
				theirs[k] = held.Until
				continue
			} else if err != nil {
				return err
			}
			taken = append(taken, k)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			l.e.log.Warn("outbox lane leases not taken", "lanes", len(want), "err", err)
		}
		taken = nil
	}
	until := l.e.clock.Now().Add(l.e.cluster.leaseTTL)
	l.mu.Lock()
	if l.theirs == nil || len(l.theirs) > 4*laneQueue*dispatchPage {
		l.theirs = map[laneKey]time.Time{} // bounded: forget, and learn again
	}
	for k, until := range theirs {
		l.theirs[k] = until
	}
	for _, k := range taken {
		delete(l.theirs, k)
		ln, ok := l.m[k]
		if !ok {
			ln = &lane{idleSince: l.e.clock.Now()}
			l.m[k] = ln
		}
		ln.until = until
		got[k] = true
	}
	l.mu.Unlock()
	return func(k laneKey) bool { return got[k] }
}

// renew extends the leases of this process's lanes in one transaction; a lane
// whose lease another process took stops here (its queued entries are that
// process's to deliver; the entry in flight finishes). When the leases cannot
// be renewed, a lane whose lease would lapse before the next renewal could land
// stops the same way, since another process may take it then.
func (l *lanes) renew(ctx context.Context) {
	l.mu.Lock()
	var keys []laneKey
	for k, ln := range l.m {
		if ln.leased() {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	var lost []laneKey
	until := l.e.clock.Now().Add(l.e.cluster.leaseTTL)
	rctx, cancel := context.WithTimeout(ctx, l.e.cluster.leaseTTL/3)
	err := l.e.store.Batch(rctx, func(tx Tx) error {
		lost = nil
		now := l.e.clock.Now()
		for _, k := range keys {
			_, err := TakeLeaseTx(tx, LeaseKeyLane(k.account, k.conv), l.e.cluster.incarnation, now, l.e.cluster.leaseTTL)
			if errors.Is(err, ErrLeaseHeld) {
				lost = append(lost, k)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.e.log.Warn("renewing outbox lane leases failed; retrying", "lanes", len(keys), "err", err)
		for _, k := range keys {
			if ln, ok := l.m[k]; ok && ln.leased() && l.e.cluster.lapsesBeforeRenewal(ln.until) {
				lost = append(lost, k)
			}
		}
	} else {
		for _, k := range keys {
			if ln, ok := l.m[k]; ok && ln.leased() {
				ln.until = until
			}
		}
	}
	for _, k := range lost {
		ln, ok := l.m[k]
		if !ok || !ln.leased() {
			continue
		}
		l.e.log.Warn("outbox lane lease lost or about to lapse; stopping the lane here", "account", k.account, "conversation", k.conv)
		ln.until = time.Time{}
		for _, id := range ln.queue {
			l.done(id)
		}
		ln.queue = nil
	}
}

// leased reports whether this process holds the lane's lease.
func (ln *lane) leased() bool { return !ln.until.IsZero() }

// holds reports whether this process may deliver on ln now: always unshared;
// shared, while it holds the lane's lease and the lease has not lapsed.
func (l *lanes) holds(ln *lane) bool {
	if !l.e.cluster.shared {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.e.clock.Now().Before(ln.until)
}

// dropReleased drops the leases of lanes release forgot, so another process
// may take them at once.
func (l *lanes) dropReleased(ctx context.Context) {
	l.mu.Lock()
	keys := l.drop
	l.drop = nil
	l.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	l.dropLeases(ctx, keys)
}

// dropAll drops the leases of every lane this process holds (shutdown).
func (l *lanes) dropAll(ctx context.Context) {
	if !l.e.cluster.shared {
		return
	}
	l.mu.Lock()
	keys := l.drop
	l.drop = nil
	for k, ln := range l.m {
		if ln.leased() {
			keys = append(keys, k)
			ln.until = time.Time{}
		}
	}
	l.mu.Unlock()
	l.dropLeases(ctx, keys)
}

func (l *lanes) dropLeases(ctx context.Context, keys []laneKey) {
	if len(keys) == 0 {
		return
	}
	err := l.e.store.Update(ctx, func(tx Tx) error {
		for _, k := range keys {
			if err := DropLeaseTx(tx, LeaseKeyLane(k.account, k.conv), l.e.cluster.incarnation); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		l.e.log.Warn("outbox lane leases not dropped; they lapse by themselves", "lanes", len(keys), "err", err)
	}
}

// anyMine reports whether an entry of pending is this process's to deliver:
// any, unshared; shared, one of a lane it holds.
func (l *lanes) anyMine(pending []OutboxEntry) bool {
	if !l.e.cluster.shared {
		return len(pending) > 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range pending {
		if ln, ok := l.m[laneKey{o.Account, o.Conversation}]; ok && ln.leased() {
			return true
		}
	}
	return false
}

// dropTimeout bounds releasing leases at shutdown.
const dropTimeout = 5 * time.Second
