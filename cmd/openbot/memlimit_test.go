package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
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

// Serve sets limits.memory_limit_bytes as the process's soft memory limit, a
// reload applies a new value, and the limit the process had comes back when
// serve stops (memory flat under bursts, DESIGN.md §9).
func TestServeSetsMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	gcBefore := gcPercent()
	serveWithLimit(t, "limits: {memory_limit_bytes: 67108864}\n", map[string]string{}, "soft memory limit", func(string, string) {
		if got := debug.SetMemoryLimit(-1); got != 64<<20 {
			t.Errorf("while serving: memory limit %d, want %d (limits.memory_limit_bytes)", got, 64<<20)
		}
		if got := gcPercent(); got != limitedGCPercent {
			t.Errorf("while serving under a limit: GC percent %d, want %d", got, limitedGCPercent)
		}
	})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after serve stopped: memory limit %d, want the one before, %d", got, before)
	}
	if got := gcPercent(); got != gcBefore {
		t.Errorf("after serve stopped: GC percent %d, want the one before, %d", got, gcBefore)
	}
}

// gcPercent reads the collector's GC percent (GOGC) in force.
func gcPercent() int { return int(readMetrics("/gc/gogc:percent")[0]) }

// The GC percent goes with the limit: limitedGCPercent under one, the
// runtime's default with none, untouched when GOGC is set; restore puts back
// the first.
func TestMemoryLimitGCPercent(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	setLimit := func(int64) int64 { return math.MaxInt64 }
	cur := 100
	var calls []int
	setGC := func(n int) int {
		old := cur
		calls, cur = append(calls, n), n
		return old
	}
	m := newMemoryLimit(noEnv, setLimit, slog.New(slog.DiscardHandler))
	m.setGC = setGC
	m.apply(config.Limits{})
	m.apply(config.Limits{MemoryLimitBytes: config.NoMemoryLimit})
	m.apply(config.Limits{MemoryLimitBytes: 40 << 20})
	m.restore()
	if want := []int{limitedGCPercent, 100, limitedGCPercent, 100}; !slices.Equal(calls, want) {
		t.Errorf("GC percent set to %v, want %v", calls, want)
	}
	env := newMemoryLimit(func(k string) (string, bool) { return "50", k == "GOGC" }, setLimit, slog.New(slog.DiscardHandler))
	env.setGC, calls = setGC, nil
	env.apply(config.Limits{})
	env.restore()
	if len(calls) != 0 {
		t.Errorf("with GOGC set: GC percent set to %v, want untouched", calls)
	}
	// A limit from GOMEMLIMIT is a limit too.
	fromEnv := newMemoryLimit(func(k string) (string, bool) { return "512MiB", k == "GOMEMLIMIT" },
		func(int64) int64 { return 512 << 20 }, slog.New(slog.DiscardHandler))
	fromEnv.setGC, calls = setGC, nil
	fromEnv.apply(config.Limits{})
	fromEnv.restore()
	if want := []int{limitedGCPercent, 100}; !slices.Equal(calls, want) {
		t.Errorf("with GOMEMLIMIT set: GC percent set to %v, want %v", calls, want)
	}
}

// A reload that changes limits.memory_limit_bytes applies it at once.
func TestReloadAppliesMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	serveWithLimit(t, "", map[string]string{}, `"http listening"`, func(dir, logText string) {
		if got := debug.SetMemoryLimit(-1); got != config.DefaultMemoryLimitBytes {
			t.Errorf("serving with no memory_limit_bytes: memory limit %d, want the default %d", got, config.DefaultMemoryLimitBytes)
		}
		reloadConfig(t, dir, "  - {handle: chief_of_staff}\nlimits: {memory_limit_bytes: 33554432}\n")
		reloadOver(t, logText)
		if got := debug.SetMemoryLimit(-1); got != 32<<20 {
			t.Errorf("after the reload: memory limit %d, want %d", got, 32<<20)
		}
		reloadConfig(t, dir, "  - {handle: chief_of_staff}\nlimits: {memory_limit_bytes: -1}\n")
		reloadOver(t, logText)
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("after the reload to -1: memory limit %d, want none (%d)", got, int64(math.MaxInt64))
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

// The memoryLimit alone: default, value, none, and the first limit restored.
func TestMemoryLimitApply(t *testing.T) {
	cur := int64(math.MaxInt64)
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
	m.apply(config.Limits{MemoryLimitBytes: config.NoMemoryLimit})
	m.restore()
	want := []int64{24 << 20, 40 << 20, math.MaxInt64, math.MaxInt64}
	if len(calls) != len(want) {
		t.Fatalf("set calls %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("set calls %v, want %v", calls, want)
		}
	}
	env := newMemoryLimit(func(k string) (string, bool) { return "512MiB", k == "GOMEMLIMIT" }, set, slog.New(slog.DiscardHandler))
	calls = nil
	env.apply(config.Limits{})
	env.restore()
	if len(calls) != 0 {
		t.Errorf("with GOMEMLIMIT set: set calls %v, want none", calls)
	}
}

// When the collector hits its CPU cap to keep under the soft limit (the
// runtime's limiter cycle moves), serve warns once per time it moved, naming
// the key to raise; quiet otherwise.
func TestWatchLimiterWarnsWhenCapped(t *testing.T) {
	var logBuf lockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	var cycle atomic.Uint64
	tick := make(chan time.Time) // unbuffered: a send returns once the previous tick was handled
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); watchLimiter(ctx, tick, cycle.Load, log, nil) }()
	step := func() { tick <- time.Time{}; tick <- time.Time{} }
	step()
	if strings.Contains(logBuf.String(), "memory_limit_bytes") {
		t.Fatalf("warned with the limiter never engaged:\n%s", logBuf.String())
	}
	cycle.Store(42)
	step()
	step()
	if n := strings.Count(logBuf.String(), "raise limits.memory_limit_bytes"); n != 1 {
		t.Errorf("%d warnings after the limiter engaged once, want 1:\n%s", n, logBuf.String())
	}
	cancel()
	<-done
}

// When the collector hit its cap under the default limit, the limit is raised
// to half the live heap above it plus the runtime's own memory, never lowered
// again; a limit set in the config stays as given.
func TestMemoryLimitRaisedWhenCapped(t *testing.T) {
	var calls []int64
	set := func(n int64) int64 {
		if n >= 0 {
			calls = append(calls, n)
		}
		return math.MaxInt64
	}
	m := newMemoryLimit(func(string) (string, bool) { return "", false }, set, slog.New(slog.DiscardHandler))
	m.apply(config.Limits{})
	m.raise(4<<20, 8<<20)  // small heap: the default holds
	m.raise(20<<20, 8<<20) // 20 MiB live: 30 + 8
	m.raise(20<<20, 8<<20) // unchanged: no call
	m.raise(2<<20, 8<<20)  // never lowered
	want := []int64{24 << 20, 38 << 20}
	if !slices.Equal(calls, want) {
		t.Fatalf("set calls %v, want %v", calls, want)
	}
	calls = nil
	m.apply(config.Limits{MemoryLimitBytes: 32 << 20})
	m.raise(40<<20, 8<<20)
	if !slices.Equal(calls, []int64{32 << 20}) {
		t.Fatalf("with a limit in the config: set calls %v, want it alone", calls)
	}

	var logBuf lockedBuffer
	var cycle atomic.Uint64
	var raised atomic.Int32
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchLimiter(ctx, tick, cycle.Load, slog.New(slog.NewTextHandler(&logBuf, nil)), func() { raised.Add(1) })
	}()
	tick <- time.Time{}
	tick <- time.Time{}
	if raised.Load() != 0 {
		t.Fatal("raised with the collector never capped")
	}
	cycle.Store(7)
	tick <- time.Time{}
	tick <- time.Time{}
	cancel()
	<-done
	if raised.Load() != 1 {
		t.Fatalf("raised %d times after one capped cycle, want 1", raised.Load())
	}
}
