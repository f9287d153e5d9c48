package main

import (
	"bytes"
	"context"
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
		return call(t, method, "http://"+addr+p, auth, `{"bot":"engineer"}`)
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

	// The CLI steers through the same API with admin.token.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"resume", "engineer", "--config", path}, nil, &out, &errOut, envOf(env)); code != exitOK || out.String() != "@engineer resumed\n" {
		t.Fatalf("openbot resume = %d %q %q", code, out.String(), errOut.String())
	}
	if _, body := do(http.MethodGet, "/api/v1/bots", "Bearer "+consoleToken); strings.Contains(body, `"paused"`) {
		t.Fatalf("bots after resume: %s", body)
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"cancel", "--config", path, "999"}, nil, &out, &errOut, envOf(env)); code != exitFail || !strings.Contains(errOut.String(), "not found") {
		t.Fatalf("openbot cancel 999 = %d %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"stop", "--config", path, "1"}, nil, &out, &errOut, envOf(env)); code != exitUsage {
		t.Fatalf("openbot stop without --bot = %d %q", code, errOut.String())
	}
	wrong := map[string]string{}
	for k, v := range env {
		wrong[k] = v
	}
	wrong["OPENBOT_ADMIN_TOKEN"] = consoleToken + "x"
	errOut.Reset()
	if code := run(context.Background(), []string{"pause", "--config", path, "engineer"}, nil, &out, &errOut, envOf(wrong)); code != exitFail || !strings.Contains(errOut.String(), "refused admin.token") {
		t.Fatalf("openbot pause with a wrong token = %d %q", code, errOut.String())
	}
}
