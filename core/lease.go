package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Leases (DESIGN.md §7, seed G8 "leased inbox items, shared bus"): when several
// openbot processes share one store (PostgreSQL), every piece of work that must
// have one owner at a time is claimed by a process with an expiry and renewed
// while held. A process that dies stops renewing; once its claims expire another
// process takes the work over. Claims are rows read and written inside the
// store's serialized write transactions, so taking one is one transaction and the
// first taker wins.
//
// Two kinds exist:
//   - a running run is its own claim: Run.Owner and Run.LeaseUntil, set by the
//     pick that starts it, so at most one run per (bot, thread) and a bot's
//     concurrency limit hold across processes (core/scheduler.go);
//   - everything else (an outbox lane per (account, conversation), an account's
//     long-lived ingress) is a Lease record under a key (LeaseKey*).
//
// Expiry is compared with each process's own clock: hosts sharing a store must
// keep their clocks synchronised (NTP) well within the lease TTL.

// DefaultLeaseTTL is how long a claim lasts without renewal when
// Options.LeaseTTL is 0. Holders renew every third of it.
const DefaultLeaseTTL = 15 * time.Second

// Lease is a claim on a named resource by one process until Until (DESIGN.md
// §7). Key names the resource (LeaseKeyLane, LeaseKeyIngress); Owner is the
// process id (Options.ProcessID). Since is when Owner took it (renewals keep
// it); zero on a lease written before it was recorded.
type Lease struct {
	Key   string    `json:"key"`
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
	Since time.Time `json:"since,omitzero"`
}

// Live reports whether the lease is held at now.
func (l Lease) Live(now time.Time) bool { return l.Owner != "" && now.Before(l.Until) }

// LeaseKeyLane is the lease key of the outbox lane of (account, conversation).
func LeaseKeyLane(account AccountID, conv ConversationRef) string {
	return "lane/" + string(account) + "/" + string(conv)
}

// LeaseKeyIngress is the lease key of an account's long-lived ingress (Slack
// Socket Mode, Telegram long polling, Feishu long connection).
func LeaseKeyIngress(account AccountID) string { return "ingress/" + string(account) }

// LeaseKeyProcess is the lease key a running process holds on its own id, so
// two live processes never share one (Options.ProcessID).
func LeaseKeyProcess(id string) string { return "process/" + id }

// LeaseKeyWorker is the lease key of a background worker of which one process
// at a time runs the store's whole share (the reflector, the message index,
// the retention pruner).
func LeaseKeyWorker(name string) string { return "worker/" + name }

// ErrLeaseHeld is returned (wrapped, naming the holder) by TakeLeaseTx when
// another process holds a live lease on the key.
var ErrLeaseHeld = errors.New("lease held by another process")

// TakeLeaseTx takes or renews the lease on key for owner until now+ttl, inside
// tx. It succeeds when the key is free, expired or already owner's; otherwise it
// returns the live lease and an error wrapping ErrLeaseHeld.
func TakeLeaseTx(tx Tx, key, owner string, now time.Time, ttl time.Duration) (Lease, error) {
	if key == "" || owner == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("core: lease needs a key, an owner and a positive ttl (key %q, owner %q, ttl %s)", key, owner, ttl)
	}
	cur, err := tx.Lease(key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Lease{}, err
	}
	if err == nil && cur.Owner != owner && cur.Live(now) {
		return cur, fmt.Errorf("%s: %w (%s until %s)", key, ErrLeaseHeld, cur.Owner, cur.Until.Format(time.RFC3339))
	}
	l := Lease{Key: key, Owner: owner, Until: now.Add(ttl), Since: now}
	if err == nil && cur.Owner == owner && !cur.Since.IsZero() {
		l.Since = cur.Since // a renewal
	}
	return l, tx.PutLease(l)
}

// DropLeaseTx releases owner's lease on key inside tx; a lease another process
// holds, or none, is left alone.
func DropLeaseTx(tx Tx, key, owner string) error {
	cur, err := tx.Lease(key)
	if errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if cur.Owner != owner {
		return nil
	}
	return tx.DeleteLease(key)
}

// Hinter is implemented by a store that several processes share (PostgreSQL
// LISTEN/NOTIFY): hints are best-effort wake-ups between processes, never the
// truth; each process also sweeps the store every few seconds for work a lost
// hint did not announce (DESIGN.md §7).
type Hinter interface {
	// Hint sends payload (at most 1000 bytes) to every listening process, this
	// one included. It is best effort: an error means the hint may be lost.
	Hint(ctx context.Context, payload string) error
	// ListenHints calls fn with each hint's payload, on one goroutine, until ctx
	// is done; it reconnects after a lost connection (hints sent meanwhile are
	// lost) and returns ctx.Err().
	ListenHints(ctx context.Context, fn func(payload string)) error
}

// splitHint parses "<process> <verb> <arg>" hints.
func splitHint(p string) (from, verb, arg string, ok bool) {
	from, rest, ok1 := strings.Cut(p, " ")
	verb, arg, _ = strings.Cut(rest, " ")
	return from, verb, arg, ok1 && verb != ""
}
