package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// PruneKind names a kind of record the pruner deletes (DESIGN.md §10 "retention").
type PruneKind string

// The kinds of records retention deletes, oldest first.
const (
	// PruneRunEvents deletes the events of runs that ended (completed, failed,
	// cancelled) before the cutoff; runs still queued, running or waiting for a
	// person keep theirs. The Run records themselves stay.
	PruneRunEvents PruneKind = "run_events"
	// PruneActivity deletes activity lines written before the cutoff.
	PruneActivity PruneKind = "activity"
	// PruneOutbox deletes delivered and failed outbox entries created before the
	// cutoff; pending ones are never deleted.
	PruneOutbox PruneKind = "outbox"
	// PruneDedup deletes dedup keys whose message was stored before the cutoff
	// (or is gone).
	PruneDedup PruneKind = "dedup_keys"
	// PruneIdleMessages deletes the messages of threads whose newest message is
	// older than the cutoff and which have no queued or processing work. The
	// thread record stays; a new message in it starts from an empty history.
	PruneIdleMessages PruneKind = "idle_thread_messages"
)

// PruneKinds is every kind, in the order a pass prunes them.
// Idle threads' messages go before dedup keys, so the keys of the messages just
// deleted go in the same pass.
var PruneKinds = []PruneKind{PruneRunEvents, PruneActivity, PruneOutbox, PruneIdleMessages, PruneDedup}

// Pruning is implemented by stores that can delete old records. It is separate
// from Store so that a store without it still works (nothing is pruned).
type Pruning interface {
	// Prune deletes at most limit records of kind older than before in ONE short
	// read-write transaction (examining a bounded number of keys, a few times
	// limit), so ingestion waits at most one such transaction. It returns how
	// many records it deleted and whether more may remain (call again). It is
	// safe to call concurrently with every other store method; a record that is
	// kept is never changed.
	Prune(ctx context.Context, kind PruneKind, before time.Time, limit int) (deleted int, more bool, err error)
}

// MinDedupRetention is the shortest time dedup keys are kept: longer than any
// platform's redelivery window, so a redelivered message is still recognised.
// Slack retries an event three times within about an hour; Feishu retries a
// push over about seven hours; Telegram keeps an unconfirmed update (and
// retries a failing webhook) for up to 24 hours, the longest of the three.
const MinDedupRetention = 24 * time.Hour

// Retention defaults (DESIGN.md §10 "retention").
const (
	DefaultRunEventsRetention = 90 * 24 * time.Hour
	DefaultActivityRetention  = 30 * 24 * time.Hour
	DefaultOutboxRetention    = 30 * 24 * time.Hour
	DefaultDedupRetention     = 7 * 24 * time.Hour
	DefaultPruneInterval      = 10 * time.Minute
	DefaultPruneBatch         = 500
	// prunePause is the pause between two prune transactions of one pass, so a
	// pass never holds the writer for long stretches.
	prunePause = 5 * time.Millisecond
)

// Retention says how long each kind of record is kept; zero durations take the
// defaults above, except IdleThreadMessages, where zero is off.
type Retention struct {
	RunEvents time.Duration
	Activity  time.Duration
	Outbox    time.Duration
	// DedupKeys must be at least MinDedupRetention.
	DedupKeys time.Duration
	// IdleThreadMessages, when set, deletes the messages of threads idle longer.
	IdleThreadMessages time.Duration
}

// PrunerOptions configures a Pruner.
type PrunerOptions struct {
	Store     Pruning
	Retention Retention
	// Clock gives "now" for the cutoffs; defaults to the system clock.
	Clock Clock
	// Interval between passes; default DefaultPruneInterval. The first pass runs
	// one interval after start.
	Interval time.Duration
	// Batch is the most records one transaction deletes; default DefaultPruneBatch.
	Batch  int
	Logger *slog.Logger
}

// Pruner deletes records older than their retention in small transactions
// (DESIGN.md §10 "retention"). Create it with NewPruner and call Run once.
type Pruner struct {
	opts PrunerOptions
	log  *slog.Logger
}

// NewPruner checks opts and applies the defaults. It does no I/O. It fails for a
// nil Store and for DedupKeys below MinDedupRetention.
func NewPruner(opts PrunerOptions) (*Pruner, error) {
	if opts.Store == nil {
		return nil, errors.New("pruner: no store")
	}
	r := &opts.Retention
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&r.RunEvents, DefaultRunEventsRetention)
	def(&r.Activity, DefaultActivityRetention)
	def(&r.Outbox, DefaultOutboxRetention)
	def(&r.DedupKeys, DefaultDedupRetention)
	def(&opts.Interval, DefaultPruneInterval)
	if r.DedupKeys < MinDedupRetention {
		return nil, fmt.Errorf("pruner: dedup keys must be kept at least %s (platform redelivery windows), not %s", MinDedupRetention, r.DedupKeys)
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultPruneBatch
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pruner{opts: opts, log: opts.Logger}, nil
}

// keep returns how long kind is kept, 0 for never pruned.
func (p *Pruner) keep(kind PruneKind) time.Duration {
	r := p.opts.Retention
	switch kind {
	case PruneRunEvents:
		return r.RunEvents
	case PruneActivity:
		return r.Activity
	case PruneOutbox:
		return r.Outbox
	case PruneDedup:
		return r.DedupKeys
	case PruneIdleMessages:
		return r.IdleThreadMessages
	}
	return 0
}

// Run prunes every Interval until ctx is done, then returns nil; it stops
// within one prune transaction of ctx ending. A failing pass is logged and
// retried at the next interval.
func (p *Pruner) Run(ctx context.Context) error {
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := p.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("prune pass failed", "err", err)
		}
		for kind, c := range n {
			if c > 0 {
				p.log.Info("pruned", "kind", string(kind), "records", c)
			}
		}
	}
}

// Pass prunes every kind once, down to its cutoff (now from Clock minus its
// retention), one transaction of at most Batch records at a time with a short
// pause between transactions. It returns the records deleted per kind.
func (p *Pruner) Pass(ctx context.Context) (map[PruneKind]int, error) {
	out := map[PruneKind]int{}
	now := p.opts.Clock.Now()
	var errs []error
	for _, kind := range PruneKinds {
		keep := p.keep(kind)
		if keep <= 0 {
			continue
		}
		before := now.Add(-keep)
		for {
			n, more, err := p.opts.Store.Prune(ctx, kind, before, p.opts.Batch)
			out[kind] += n
			if err != nil {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("prune %s: %w", kind, err))
				break
			}
			if !more {
				break
			}
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(prunePause):
			}
		}
	}
	return out, errors.Join(errs...)
}
