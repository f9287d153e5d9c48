package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// health backs GET /healthz: 200 once the store is open, the engine has recovered
// and every configured account takes messages (its ingress is live, see
// ingressReadier), stands by for another process holding its ingress, or was
// skipped; 503 before, listing each account's state so the
// one that is not ready is named (DESIGN.md §9).
type health struct {
	mu       sync.Mutex
	engine   <-chan struct{} // closed when the engine is ready
	accounts map[string]string
	ingress  map[string]<-chan struct{} // closed when the account's ingress is live
	down     map[string]func() string   // why the live ingress is down now ("" when up)
	pulses   map[string]*watched        // accounts the watchdog watches (watchdog.go)
	dog      dogOptions
}

// ingressReadier is implemented by adapters that know when their ingress is live:
// the Telegram poller sent its first getUpdates, Socket Mode got hello, the Feishu
// long connection is up, an HTTP-mode account's routes are mounted. The channel is
// closed then. A started account without it counts as live.
type ingressReadier interface {
	IngressReady() <-chan struct{}
}

// ingressDowner is implemented by adapters whose ingress can go down after it
// was live (the Telegram poller failing and backing off): IngressDown says why,
// or "" when it takes messages, so readiness reflects the current state
// instead of latching at the first success.
type ingressDowner interface {
	IngressDown() string
}

func newHealth(engineReady <-chan struct{}) *health {
	return &health{engine: engineReady, accounts: map[string]string{}, ingress: map[string]<-chan struct{}{},
		down: map[string]func() string{}, pulses: map[string]*watched{},
		dog: dogOptions{log: slog.New(slog.DiscardHandler), now: time.Now}}
}

// watch makes a started account read "connecting" (and /healthz 503) until
// r's ingress is live, and again while it is down (ingressDowner).
func (h *health) watch(account string, r ingressReadier) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ingress[account] = r.IngressReady()
	if d, ok := r.(ingressDowner); ok {
		h.down[account] = d.IngressDown
	} else {
		delete(h.down, account)
	}
}

// stateLocked is account's state as shown: "started" becomes "connecting: ..." while its
// ingress is not live. h.mu is held.
func (h *health) stateLocked(account string) string {
	st := h.accounts[account]
	if w := h.silentState(account); w != "" && st == "started" {
		return w
	}
	if live, ok := h.ingress[account]; ok && st == "started" {
		select {
		case <-live:
		default:
			return "connecting: ingress not live yet"
		}
		if down := h.down[account]; down != nil {
			if why := down(); why != "" {
				return "connecting: ingress down: " + why
			}
		}
	}
	return st
}

// set records an account's state: "pending", "started", "skipped: <why>",
// "standby (ingress held by <process>)" (another process sharing the store runs
// its ingress, see ingresslease.go; ready) or "failed: <why>" (an account that
// stopped for good; /healthz then answers 503).
func (h *health) set(account, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.pulses[account]; w != nil && state == "started" && h.accounts[account] != "started" {
		w.since = h.dog.now() // the watchdog counts silence from here at most
	}
	h.accounts[account] = state
}

// healthHeader is set on every /healthz answer, so `openbot doctor` can tell
// that the listener it finds taken is held by a running openbot. It says
// nothing more than that.
const healthHeader = "X-Openbot-Health"

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ready := true
	select {
	case <-h.engine:
	default:
		ready = false
	}
	h.mu.Lock()
	names := make([]string, 0, len(h.accounts))
	for n := range h.accounts {
		names = append(names, n)
	}
	sort.Strings(names)
	lines := make([]string, 0, len(names))
	failed := false
	for _, n := range names {
		st := h.stateLocked(n)
		if st == "pending" || strings.HasPrefix(st, "connecting") {
			ready = false
		}
		if strings.HasPrefix(st, "failed") {
			failed = true
		}
		lines = append(lines, n+": "+st)
	}
	h.mu.Unlock()

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(healthHeader, "1")
	switch {
	case ready && failed:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "degraded: an account has stopped")
	case ready:
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "ok")
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "starting")
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// remove forgets an account removed from the configuration.
func (h *health) remove(account string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.accounts, account)
	delete(h.ingress, account)
	delete(h.down, account)
	if _, ok := h.pulses[account]; ok && h.dog.metrics != nil {
		h.dog.metrics.ForgetChannel(account)
	}
	delete(h.pulses, account)
}
