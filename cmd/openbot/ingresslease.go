package main

import (
	"context"
	"strings"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/slack"
	"openbot/adapters/telegram"
	"openbot/config"
	"openbot/core"
)

// Ingress leases (DESIGN.md §7): processes sharing one store (driver postgres)
// each run every account, but an account's long-lived ingress (Slack Socket
// Mode, Telegram long polling, Feishu long connection) must run in exactly one
// of them, or Telegram refuses the second poller and Slack and Feishu hand each
// event to only one connection anyway. So such an account's Run runs inside
// core.Engine.HoldLease on core.LeaseKeyIngress: the process holding the lease
// runs it; the others stand by, and one of them takes over once the holder's
// lease lapses (it died, or lost the database), resuming from the durable
// cursors (Telegram's offset is read from the store each time Run starts).
// Webhook-mode accounts run in every process (each serves the webhook routes),
// and so does delivery: any process may deliver a reply of a run it executed.

// standbyPrefix starts the /healthz state of an account whose ingress another
// process holds: the account works (this process delivers for it), so it counts
// as ready.
const standbyPrefix = "standby"

// standbyState is the /healthz state of an account whose ingress another
// process holds; holder is its claim owner ("<process id>#<per-start part>",
// core.Engine.ClaimOwner), shown by its process id.
func standbyState(holder string) string {
	id, _, _ := strings.Cut(holder, "#")
	return standbyPrefix + " (ingress held by " + id + ")"
}

// standbyWorker is implemented by adapters with background work every process
// sharing the store needs while another holds the account's ingress (Telegram
// repeats the typing action for the runs this process executes).
type standbyWorker interface {
	RunTypist(ctx context.Context) error
}

// leasingState is the /healthz state of a leased account before this process
// knows whether it holds the ingress (not ready yet).
const leasingState = "connecting: taking the ingress lease"

// longLivedIngress reports whether the account entry cfg (config.Slack,
// config.Telegram, config.Feishu) runs a long-lived ingress connection, which
// one process of a shared store at a time may run; webhook modes do not.
func longLivedIngress(cfg any) bool {
	switch c := cfg.(type) {
	case config.Slack:
		return c.Mode == "" || c.Mode == slack.ModeSocket
	case config.Telegram:
		return c.Mode == "" || c.Mode == telegram.ModePolling
	case config.Feishu:
		return c.Mode == "" || c.Mode == feishu.ModeWebsocket
	}
	return false
}

// leasedRun returns the function that runs account ac's Run: r.Run itself, or,
// when the engine shares its store and the account's ingress is long-lived,
// r.Run held under the account's ingress lease, showing "standby" on /healthz
// while another process holds it, "started" while this one runs it, and
// leasingState (not ready) in between, such as while the store is unreachable.
// Unshared, a long-lived ingress runs in this process alone, which
// s.ingressSince records while it runs.
func (s *accountSet) leasedRun(ac *account, r core.Runner) (run func(context.Context) error, leased bool) {
	if !longLivedIngress(ac.cfg) {
		return r.Run, false
	}
	if !s.eng.Shared() {
		return func(ctx context.Context) error {
			since := time.Now()
			s.ingressSince.Store(ac.name, since)
			defer s.ingressSince.CompareAndDelete(ac.name, since) // not a restarted run's
			return r.Run(ctx)
		}, false
	}
	key := core.LeaseKeyIngress(core.AccountID(ac.name))
	return func(ctx context.Context) error {
		if sw, ok := ac.val.(standbyWorker); ok {
			// Work every process needs whether or not it holds the ingress,
			// owned here: it ends with ctx, before this func returns.
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = sw.RunTypist(sctx)
			}()
			defer func() { cancel(); <-done }()
		}
		return s.eng.HoldLease(ctx, key, func(ctx context.Context) error {
			s.hl.set(ac.name, "started")
			// Lost or given up: not ready again until this process knows
			// whether another holds the ingress (standby) or it takes it back.
			defer s.hl.set(ac.name, leasingState)
			s.log.Info("account ingress taken", "account", ac.name, "process", s.eng.ProcessID())
			return r.Run(ctx)
		}, func(holder string) {
			if holder == "" { // the store could not be asked: not known to be in good hands
				s.hl.set(ac.name, leasingState)
				return
			}
			s.hl.set(ac.name, standbyState(holder))
		})
	}, true
}
