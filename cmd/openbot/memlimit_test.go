package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/config"
)

// serveWithLimit runs `openbot chat` (serve's wiring) with limits in the config
// and env, waits until it logged want, calls during while it runs (with the
// config's folder and the log up to "http listening"), then stops it.
func serveWithLimit(t *testing.T, limits string, env map[string]string, want string, during func(dir, logText string)) {
	t.Helper()
	llm := openaitest.New(t)
	env["OPENAI_BASE_URL"] = llm.URL()
	dir := t.TempDir()
	path := reloadConfig(t, dir, "  - {handle: chief_of_staff}\n"+limits)
	stdin, feed := io.Pipe()
	defer feed.Close()
	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"chat", "--config", path}, stdin, &out, &errb, envOf(env)) }()
	logText := waitLog(t, dir, `"http listening"`)
	waitLog(t, dir, want)
	during(dir, logText)
	cancel()
	<-done
}

// reloadOver POSTs /admin/reload to the serve whose log is logText.
func reloadOver(t *testing.T, logText string) {
	t.Helper()
	addr := regexp.MustCompile(`"http listening" addr=(\S+)`).FindStringSubmatch(logText)
	if addr == nil {
		t.Fatalf("no listener address in the log:\n%s", logText)
	}
	postOK(t, addr[1], "/admin/reload", reloadToken)
}

// postOK POSTs path to the serve at addr with the bearer token and fails the
// test unless it answers 200.
func postOK(t *testing.T, addr, path, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d", path, resp.StatusCode)
	}
}

// Serve sets limits.memory_limit_bytes as the process's soft memory limit, and
// the limit the process had comes back when serve stops.
func TestServeSetsMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	serveWithLimit(t, "limits: {memory_limit_bytes: 67108864}\n", map[string]string{}, "soft memory limit", func(string, string) {
		if got := debug.SetMemoryLimit(-1); got != 64<<20 {
			t.Errorf("while serving: memory limit %d, want %d (limits.memory_limit_bytes)", got, 64<<20)
		}
	})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after serve stopped: memory limit %d, want the one before, %d", got, before)
	}
}

// Unset, the key leaves the process's limit alone; a reload that sets it
// applies it at once, and one that removes it puts the process's own back.
func TestReloadAppliesMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	serveWithLimit(t, "", map[string]string{}, `"http listening"`, func(dir, logText string) {
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("serving with no memory_limit_bytes: memory limit %d, want the process's own, %d", got, before)
		}
		reloadConfig(t, dir, "  - {handle: chief_of_staff}\nlimits: {memory_limit_bytes: 33554432}\n")
		reloadOver(t, logText)
		if got := debug.SetMemoryLimit(-1); got != 32<<20 {
			t.Errorf("after the reload: memory limit %d, want %d", got, 32<<20)
		}
		reloadConfig(t, dir, "  - {handle: chief_of_staff}\n")
		reloadOver(t, logText)
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("after a reload without the key: memory limit %d, want the process's own, %d", got, before)
		}
	})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after serve stopped: memory limit %d, want the one before, %d", got, before)
	}
}

// GOMEMLIMIT in the environment wins over the config: serve leaves the limit
// the runtime took from it and says so.
func TestServeRespectsGOMEMLIMIT(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	serveWithLimit(t, "limits: {memory_limit_bytes: 67108864}\n", map[string]string{"GOMEMLIMIT": "1GiB"},
		"soft memory limit from the environment", func(string, string) {
			if got := debug.SetMemoryLimit(-1); got != before {
				t.Errorf("while serving with GOMEMLIMIT set: memory limit %d, want it untouched (%d)", got, before)
			}
		})
}

// The memoryLimit alone: unset sets nothing, a value is set, removing it puts
// back the first limit, and GOMEMLIMIT leaves everything alone.
func TestMemoryLimitApply(t *testing.T) {
	const own = int64(1) << 40
	cur := own
	var calls []int64
	set := func(n int64) int64 {
		old := cur
		if n >= 0 {
			calls = append(calls, n)
			cur = n
		}
		return old
	}
	m := newMemoryLimit(func(string) (string, bool) { return "", false }, set, slog.New(slog.DiscardHandler))
	m.apply(config.Limits{})
	m.apply(config.Limits{MemoryLimitBytes: 40 << 20})
	m.apply(config.Limits{MemoryLimitBytes: 64 << 20})
	m.apply(config.Limits{})
	m.apply(config.Limits{MemoryLimitBytes: 32 << 20})
	m.restore()
	m.restore()
	want := []int64{40 << 20, 64 << 20, own, 32 << 20, own}
	if !slices.Equal(calls, want) {
		t.Fatalf("set calls %v, want %v", calls, want)
	}
	env := newMemoryLimit(func(k string) (string, bool) { return "512MiB", k == "GOMEMLIMIT" }, set, slog.New(slog.DiscardHandler))
	calls = nil
	env.apply(config.Limits{MemoryLimitBytes: 40 << 20})
	env.restore()
	if len(calls) != 0 {
		t.Errorf("with GOMEMLIMIT set: set calls %v, want none", calls)
	}
}
