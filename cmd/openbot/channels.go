package main

import (
	"context"
	"sort"
	"strings"
	"time"

	"openbot/core"
)

// channelState is one account as the dashboard's Team page shows it (GET
// /api/v1/channels).
type channelState struct {
	Account string `json:"account"`
	// State is connected, connecting, reconnecting, standby, failing, skipped
	// or pending; Detail says more: the last error, the process holding the
	// ingress, why it was skipped.
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
	// LastIn is when the platform last answered the ingress (a polling
	// Telegram account, a Slack Socket Mode or Feishu long connection),
	// LastOut when it last accepted a post; absent where the adapter does not
	// tell (webhook and http modes have no LastIn).
	LastIn  *time.Time `json:"last_in,omitempty"`
	LastOut *time.Time `json:"last_out,omitempty"`
	// RateLimited counts the platform's 429 answers since the account
	// started, RateLimitWaitMS the waits they asked for together.
	RateLimited     int64 `json:"rate_limited"`
	RateLimitWaitMS int64 `json:"rate_limit_wait_ms"`
	// Backlog is the account's undelivered outbox entries (its delivery
	// lane), counted up to gaugeScan.
	Backlog int `json:"backlog"`
	// WatchdogMS is the watchdog's silence limit; 0 when it does not watch.
	WatchdogMS int64 `json:"watchdog_ms,omitempty"`
	// Ingress is the process running the account's long-lived ingress (Slack
	// Socket Mode, Telegram polling, Feishu long connection); absent for
	// webhook modes and while no process holds it.
	Ingress *ingressHolder `json:"ingress,omitempty"`
}

// ingressHolder is the process holding an account's ingress: on a shared
// store, the owner of its ingress lease (ingresslease.go); otherwise this
// process, since the account started.
type ingressHolder struct {
	// Process is the holder's process id (store.process_id, by default
	// <host>-<pid>-<random>).
	Process string `json:"process"`
	// ThisProcess is true when the holder is the process answering (this start
	// of it: a previous start under the same id is another holder).
	ThisProcess bool `json:"this_process"`
	// Since is when the holder took the ingress; absent when not recorded.
	Since *time.Time `json:"since,omitempty"`
	// Until is when the lease expires unless renewed (renewed every third of
	// store.lease_ttl; past when the holder stopped renewing); absent on an
	// unshared store, which has no lease.
	Until *time.Time `json:"until,omitempty"`
}

// gaugeScan bounds the outbox entries one channels answer counts.
const gaugeScan = 100000

// The optional adapter methods the channels answer reads.
type (
	lastPoster  interface{ LastPost() time.Time }
	pulseTeller interface{ Pulse() time.Time }
	rateLimiter interface {
		RateLimited() (answers int64, asked time.Duration)
	}
)

// channels lists every account health knows, sorted, with its state, the
// running adapter's figures (accts) and its outbox backlog (st).
func channels(ctx context.Context, hl *health, accts *accountSet, st core.Store) ([]channelState, error) {
	backlog := map[core.AccountID]int{}
	leases := map[string]core.Lease{}
	err := st.View(ctx, func(tx core.ReadTx) error {
		clear(backlog) // fn may run again (core.Store.View)
		clear(leases)
		if accts.eng.Shared() {
			ls, err := tx.Leases(core.LeaseKeyIngress(""))
			if err != nil {
				return err
			}
			for _, l := range ls {
				leases[l.Key] = l
			}
		}
		var after core.OutboxID
		for n := 0; n < gaugeScan; {
			page, err := tx.PendingOutbox(after, 1000)
			if err != nil {
				return err
			}
			for _, o := range page {
				backlog[o.Account]++
			}
			n += len(page)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].ID
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	hl.mu.Lock()
	out := make([]channelState, 0, len(hl.accounts))
	for name := range hl.accounts {
		c := channelState{Account: name, Backlog: backlog[core.AccountID(name)]}
		c.State, c.Detail = stateWords(hl.stateLocked(name))
		if w := hl.pulses[name]; w != nil {
			c.WatchdogMS = w.limit.Milliseconds()
			if t := w.p.Pulse(); !t.IsZero() {
				c.LastIn = &t
			}
		}
		out = append(out, c)
	}
	hl.mu.Unlock()
	for i := range out {
		v, ok := accts.live.Load(out[i].Account)
		if !ok {
			continue
		}
		if p, ok := v.(pulseTeller); ok && out[i].LastIn == nil {
			if t := p.Pulse(); !t.IsZero() {
				out[i].LastIn = &t
			}
		}
		if p, ok := v.(lastPoster); ok {
			if t := p.LastPost(); !t.IsZero() {
				out[i].LastOut = &t
			}
		}
		if r, ok := v.(rateLimiter); ok {
			n, d := r.RateLimited()
			out[i].RateLimited, out[i].RateLimitWaitMS = n, d.Milliseconds()
		}
	}
	for i := range out {
		out[i].Ingress = ingressOf(out[i].Account, accts, leases)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}

// ingressOf is who holds account's ingress: the owner of its lease in leases
// (a shared store), or this process while it runs the account's long-lived
// ingress (accountSet.ingressSince); nil when neither.
func ingressOf(account string, accts *accountSet, leases map[string]core.Lease) *ingressHolder {
	if l, ok := leases[core.LeaseKeyIngress(core.AccountID(account))]; ok {
		proc, _, _ := strings.Cut(l.Owner, "#") // ClaimOwner is "<process id>#<per-start part>"
		h := &ingressHolder{Process: proc, ThisProcess: l.Owner == accts.eng.ClaimOwner(), Until: &l.Until}
		if !l.Since.IsZero() {
			h.Since = &l.Since
		}
		return h
	}
	if v, ok := accts.ingressSince.Load(account); ok {
		since := v.(time.Time)
		return &ingressHolder{Process: accts.eng.ProcessID(), ThisProcess: true, Since: &since}
	}
	return nil
}

// stateWords turns a health state into the dashboard's word and its detail.
func stateWords(s string) (state, detail string) {
	switch {
	case s == "started":
		return "connected", ""
	case strings.HasPrefix(s, "reconnecting: "):
		return "reconnecting", strings.TrimPrefix(s, "reconnecting: ")
	case strings.HasPrefix(s, "connecting: ingress down: "):
		return "reconnecting", strings.TrimPrefix(s, "connecting: ingress down: ")
	case strings.HasPrefix(s, "connecting: "):
		return "connecting", strings.TrimPrefix(s, "connecting: ")
	case strings.HasPrefix(s, "standby"):
		return "standby", strings.Trim(strings.TrimPrefix(s, "standby"), " ()")
	case strings.HasPrefix(s, "failed: "):
		return "failing", strings.TrimPrefix(s, "failed: ")
	case strings.HasPrefix(s, "skipped: "):
		return "skipped", strings.TrimPrefix(s, "skipped: ")
	}
	return s, ""
}
