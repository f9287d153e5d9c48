package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"openbot/internal/waitctx"
)

// newProcessID returns "<host>-<pid>-<random>", unique among the processes
// sharing a store even when a host reuses a pid.
func newProcessID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ProcessID is this engine's process id (Options.ProcessID).
func (e *Engine) ProcessID() string { return e.cluster.procID }

// ClaimOwner is the owner this engine's claims name (Run.Owner, Lease.Owner):
// the process id, "#", and a random part new at each start, so a process
// restarted with the same id never mistakes its predecessor's claims for its
// own, nor does a second live process given the same id.
func (e *Engine) ClaimOwner() string { return e.cluster.incarnation }

// Shared reports whether the engine shares its store with other processes
// (Options.Shared).
func (e *Engine) Shared() bool { return e.cluster.shared }

// HoldLease runs fn while this process holds the lease on key (DESIGN.md §7,
// core/lease.go): the long-lived ingress of an account, which exactly one
// process sharing the store may run. It takes the lease (waiting while another
// process holds it, calling standby with the holder each time it finds it
// held, or with "" when the store could not be asked in time), renews it every third of the lease TTL while fn runs, and cancels fn's
// context when the lease cannot be renewed before it lapses (another process may
// then take it). When fn returns it releases the lease. HoldLease returns fn's
// error when fn stops on its own while ctx is live (the account failed for
// good) or nil when fn returns nil on its own (it is done), and nil once ctx
// is done. Unshared, it is fn(ctx).
func (e *Engine) HoldLease(ctx context.Context, key string, fn func(context.Context) error, standby func(holder string)) error {
	return e.cluster.holdLease(ctx, key, fn, standby)
}

// holdLease is Engine.HoldLease.
func (c *cluster) holdLease(ctx context.Context, key string, fn func(context.Context) error, standby func(holder string)) error {
	if !c.shared {
		return fn(ctx)
	}
	every := c.leaseTTL / 3
	for {
		tctx, cancel := context.WithTimeout(ctx, every)
		until, holder, err := c.takeLease(tctx, key)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil || holder != "" {
			if err != nil {
				c.e.log.Warn("lease not taken", "key", key, "err", err)
			}
			if standby != nil {
				standby(holder) // "" when the store could not say
			}
			if waitctx.Sleep(ctx, every) != nil {
				return nil
			}
			continue
		}
		c.e.log.Info("lease taken", "key", key, "process", c.procID)
		ferr := c.runLeased(ctx, key, until, fn)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
		c.dropLease(dctx, key)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(ferr, errLeaseLost) {
			return ferr // fn is done (nil) or failed for good
		}
		c.e.log.Warn("lease lost; trying to take it again", "key", key)
	}
}

// errLeaseLost is fn's context cause when HoldLease could not renew in time.
var errLeaseLost = errors.New("lease lost")

// runLeased runs fn, renewing the lease on key until fn returns.
func (c *cluster) runLeased(ctx context.Context, key string, until time.Time, fn func(context.Context) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }() // joined below before returning
	t := time.NewTicker(c.leaseTTL / 3)
	defer t.Stop()
	stopping := false
	for {
		select {
		case err := <-done:
			if context.Cause(fctx) == errLeaseLost {
				return errLeaseLost
			}
			return err
		case <-t.C:
			// fn must be stopped a margin (a sixth of the TTL, for clock skew
			// and for fn to wind down) before the lease lapses, since another
			// process may take it then. A renewal that hangs (a lost database)
			// is abandoned at that point, and a failed one is retried only if
			// the next tick still comes before it.
			stopBy := until.Add(-c.leaseTTL / 6)
			rctx, rcancel := context.WithTimeout(fctx, stopBy.Sub(c.e.clock.Now()))
			u, holder, err := c.takeLease(rctx, key)
			rcancel()
			switch {
			case err == nil && holder == "":
				until = u
			case holder != "" || c.lapsesBeforeRenewal(until):
				// Another process holds it, or it lapses before the next renewal
				// could land: stop before two processes run the ingress.
				if !stopping { // once: fn may take a while to wind down
					c.e.log.Warn("lease cannot be renewed; stopping its work", "key", key, "holder", holder, "err", err)
				}
				stopping = true
				cancel(errLeaseLost)
			}
		}
	}
}

// takeLease takes or renews key for this process; holder is the other
// process's id when it holds the lease.
func (c *cluster) takeLease(ctx context.Context, key string) (until time.Time, holder string, err error) {
	err = c.e.store.Update(ctx, func(tx Tx) error {
		until, holder = time.Time{}, "" // fn may run again: the last run decides
		l, err := TakeLeaseTx(tx, key, c.incarnation, c.e.clock.Now(), c.leaseTTL)
		if errors.Is(err, ErrLeaseHeld) {
			holder = l.Owner
			return nil
		}
		until = l.Until
		return err
	})
	return until, holder, err
}

// dropLease releases this process's lease on key; a failure is logged (the
// lease lapses by itself).
func (c *cluster) dropLease(ctx context.Context, key string) {
	if err := c.e.store.Update(ctx, func(tx Tx) error { return DropLeaseTx(tx, key, c.incarnation) }); err != nil {
		c.e.log.Warn("lease not released; it lapses by itself", "key", key, "err", err)
	}
}

// lapsesBeforeRenewal reports whether a claim held until until could lapse
// before the next renewal (a third of the TTL from now) lands, with a sixth of
// the TTL to spare for clock skew and for the work to wind down: the moment a
// holder whose renewals fail must stop (HoldLease, renewRuns, lanes.renew).
func (c *cluster) lapsesBeforeRenewal(until time.Time) bool {
	return !until.After(c.e.clock.Now().Add(c.leaseTTL/3 + c.leaseTTL/6))
}
