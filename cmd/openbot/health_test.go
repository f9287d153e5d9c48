package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func testLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestHealth(t *testing.T) {
	engineReady := make(chan struct{})
	h := newHealth(engineReady)
	h.set("console/local", "pending")
	h.set("slack/acme", "skipped: no token")
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Errorf("before the engine is ready: %d, want 503", code)
	}
	close(engineReady)
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "console/local: pending") {
		t.Errorf("with a pending account: %d %q, want 503", code, body)
	}
	h.set("console/local", "started")
	code, body := get()
	if code != http.StatusOK || body != "ok\nconsole/local: started\nslack/acme: skipped: no token\n" {
		t.Errorf("ready: %d %q", code, body)
	}
}

// TestHealthIngressNotLive: a started account whose ingress is not live yet reads
// "connecting" and keeps /healthz at 503 until its channel is closed.
func TestHealthIngressNotLive(t *testing.T) {
	engineReady := make(chan struct{})
	close(engineReady)
	h := newHealth(engineReady)
	live := make(chan struct{})
	h.set("telegram/chief", "started")
	h.watch("telegram/chief", fakeIngress{live: live, down: func() string { return "" }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "telegram/chief: connecting") {
		t.Errorf("before live: %d %q", rec.Code, rec.Body.String())
	}
	close(live)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\ntelegram/chief: started\n" {
		t.Errorf("after live: %d %q", rec.Code, rec.Body.String())
	}
}

// fakeIngress is an account's ingress for health: live is closed when it first
// takes messages; down says why it does not now.
type fakeIngress struct {
	live chan struct{}
	down func() string
}

func (f fakeIngress) IngressReady() <-chan struct{} { return f.live }
func (f fakeIngress) IngressDown() string           { return f.down() }

// TestHealthIngressDownAgain: readiness does not latch: an account whose ingress
// was live and then goes down (the Telegram poller backing off) turns /healthz
// 503 with its reason, and 200 again once it is back.
func TestHealthIngressDownAgain(t *testing.T) {
	engineReady := make(chan struct{})
	close(engineReady)
	h := newHealth(engineReady)
	live := make(chan struct{})
	close(live)
	var mu sync.Mutex
	why := ""
	h.set("telegram/chief", "started")
	h.watch("telegram/chief", fakeIngress{live: live, down: func() string { mu.Lock(); defer mu.Unlock(); return why }})
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec
	}
	if rec := get(); rec.Code != http.StatusOK {
		t.Fatalf("live: %d %q", rec.Code, rec.Body.String())
	}
	mu.Lock()
	why = "getUpdates failing; retrying"
	mu.Unlock()
	if rec := get(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "getUpdates failing") {
		t.Errorf("down: %d %q, want 503 with the reason", rec.Code, rec.Body.String())
	}
	mu.Lock()
	why = ""
	mu.Unlock()
	if rec := get(); rec.Code != http.StatusOK {
		t.Errorf("back up: %d %q", rec.Code, rec.Body.String())
	}
}
