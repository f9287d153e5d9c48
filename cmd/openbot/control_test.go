package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestConsoleSteeringAuth: the steering endpoints on serve's listener refuse a
// request without the admin token or with a wrong one (401, nothing changed)
// and steer the engine with the right one: a pause shows in GET /api/v1/bots.
func TestConsoleSteeringAuth(t *testing.T) {
	llm := openaitest.New(t)
	path, addr, env := consoleConfig(t, t.TempDir(), llm)
	startServe(t, path, env)
	do := func(method, p, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+p, strings.NewReader(`{"bot":"engineer"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, auth := range []string{"", "Bearer " + consoleToken + "x", "Basic " + consoleToken} {
		for _, p := range []string{"/api/v1/bots/engineer/pause", "/api/v1/bots/engineer/resume", "/api/v1/runs/1/cancel", "/api/v1/threads/1/stop"} {
			if code, body := do(http.MethodPost, p, auth); code != http.StatusUnauthorized || body != "unauthorized\n" {
				t.Errorf("POST %s with %q = %d %q, want 401", p, auth, code, body)
			}
		}
	}
	if _, body := do(http.MethodGet, "/api/v1/bots", "Bearer "+consoleToken); strings.Contains(body, `"paused"`) {
		t.Fatalf("a refused pause paused: %s", body)
	}
	if code, body := do(http.MethodPost, "/api/v1/bots/engineer/pause", "Bearer "+consoleToken); code != http.StatusOK {
		t.Fatalf("pause = %d %s", code, body)
	}
	if _, body := do(http.MethodGet, "/api/v1/bots", "Bearer "+consoleToken); !strings.Contains(body, `"paused":{"by":"console:you"`) {
		t.Fatalf("bots after pause: %s", body)
	}
}
