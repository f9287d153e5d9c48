package main

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// health backs GET /healthz: 200 once the store is open, the engine has recovered
// and every configured account has started or been skipped; 503 before.
type health struct {
	mu       sync.Mutex
	engine   <-chan struct{} // closed when the engine is ready
	accounts map[string]string
}

func newHealth(engineReady <-chan struct{}) *health {
	return &health{engine: engineReady, accounts: map[string]string{}}
}

// set records an account's state: "pending", "started", "skipped: <why>" or
// "failed: <why>" (an account that stopped for good; /healthz then answers 503).
func (h *health) set(account, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.accounts[account] = state
}

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
		if h.accounts[n] == "pending" {
			ready = false
		}
		if strings.HasPrefix(h.accounts[n], "failed") {
			failed = true
		}
		lines = append(lines, n+": "+h.accounts[n])
	}
	h.mu.Unlock()

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
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
}
