package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
	h.watch("telegram/chief", live)
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
