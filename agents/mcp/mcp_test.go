package mcp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

func TestStdioToolsRoundTripAndBrokenServerReported(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{
		stdioServer(t, "broken", "exit", nil),
		stdioServer(t, "alpha", "ok", nil),
	}, ResultCap: 1000})

	echo := h.tool("alpha", "alpha__echo")
	got, err := callTool(t, echo, map[string]any{"text": "hello"})
	if err != nil || got != "echo: hello" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	if !strings.Contains(string(echo.Schema()), `"text"`) || !strings.Contains(echo.Description(), "Echo the text back") {
		t.Fatalf("schema %s, description %q", echo.Schema(), echo.Description())
	}
	h.mu.Lock()
	var names []string
	for n := range h.tools["alpha"] {
		names = append(names, n)
	}
	h.mu.Unlock()
	sort.Strings(names)
	// "tasky" needs task-augmented execution, which openbot does not offer: it
	// is not offered at all.
	want := "alpha__big alpha__count alpha__crash alpha__dotted_name alpha__echo alpha__fail alpha__grow alpha__hang alpha__huge"
	if strings.Join(names, " ") != want {
		t.Fatalf("tools %v, want %s", names, want)
	}
	if got, err := callTool(t, h.tool("alpha", "alpha__dotted_name"), nil); err != nil || got != "dotted" {
		t.Fatalf("dotted: %q %v", got, err)
	}
	if _, err := callTool(t, h.tool("alpha", "alpha__fail"), nil); err == nil || !strings.Contains(err.Error(), "widget not found") {
		t.Fatalf("fail: %v", err)
	}
	got, err = callTool(t, h.tool("alpha", "alpha__big"), nil)
	if err != nil || !strings.Contains(got, "result truncated: showing the first") || !strings.Contains(got, "of 5000 bytes") || len(got) > 1000 {
		t.Fatalf("big result not capped: %d bytes, %v", len(got), err)
	}

	// The broken server is reported with its stderr and has no tools.
	h.waitFor("broken server reported", func() bool {
		return strings.Contains(h.logs.String(), "MYSERVICE_TOKEN is not set")
	})
	logs := h.logs.String()
	if !strings.Contains(logs, "failed to start") || !strings.Contains(logs, "mcp_server=broken") {
		t.Fatalf("log does not report the broken server:\n%s", logs)
	}
	for _, st := range h.m.Status() {
		switch st.Name {
		case "broken":
			if st.State == "running" || !strings.Contains(st.LastError, "MYSERVICE_TOKEN") {
				t.Errorf("broken status %+v", st)
			}
		case "alpha":
			if st.State != "running" || st.Tools != 9 {
				t.Errorf("alpha status %+v", st)
			}
		}
	}
	h.mu.Lock()
	_, present := h.tools["broken"]
	h.mu.Unlock()
	if present {
		t.Fatal("broken server has tools")
	}
	if len(h.m.Tools()) != 9 {
		t.Fatalf("Tools() = %d tools, want 9", len(h.m.Tools()))
	}
}

func TestHungCallTimesOut(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{stdioServer(t, "alpha", "ok", nil)}, CallTimeout: 300 * time.Millisecond})
	_, err := callTool(t, h.tool("alpha", "alpha__hang"), nil)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// The server still works afterwards.
	if got, err := callTool(t, h.tool("alpha", "alpha__echo"), map[string]any{"text": "still here"}); err != nil || got != "echo: still here" {
		t.Fatalf("echo after timeout: %q %v", got, err)
	}
}

func TestCrashedServerIsRestarted(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{stdioServer(t, "alpha", "ok", nil)}})
	old := h.tool("alpha", "alpha__echo")
	_, _ = callTool(t, h.tool("alpha", "alpha__crash"), nil)
	// Tools go away (nil published), then come back from a new process.
	h.waitFor("restart", func() bool {
		hist := h.history["alpha"]
		return len(hist) >= 3 && hist[1] == -1 && hist[len(hist)-1] > 0
	})
	// A tool value listed before the crash reaches the restarted server.
	if got, err := callTool(t, old, map[string]any{"text": "x"}); err != nil || got != "echo: x" {
		t.Fatalf("old tool after the restart: %q, %v", got, err)
	}
	got, err := callTool(t, h.tool("alpha", "alpha__echo"), map[string]any{"text": "again"})
	if err != nil || got != "echo: again" {
		t.Fatalf("echo after restart: %q %v", got, err)
	}
	if !strings.Contains(h.logs.String(), "restarting") {
		t.Fatalf("crash not logged:\n%s", h.logs.String())
	}
}

func TestToolListChangedRefreshes(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{stdioServer(t, "alpha", "ok", nil)}})
	if got, err := callTool(t, h.tool("alpha", "alpha__grow"), nil); err != nil || got != "grown" {
		t.Fatalf("grow: %q %v", got, err)
	}
	got, err := callTool(t, h.tool("alpha", "alpha__added"), nil)
	if err != nil || got != "I am new" {
		t.Fatalf("added: %q %v", got, err)
	}
}

func TestStubbornServerKilledWithinGrace(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	grace := time.Second
	h := start(t, Options{
		Servers:       []ServerConfig{stdioServer(t, "stubborn", "stubborn", map[string]string{envPidFile: pidFile})},
		ShutdownGrace: grace,
	})
	h.tool("stubborn", "stubborn__echo")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	took := h.stop()
	// Generous bound: the grace period plus scheduling slack on a busy machine.
	if took > grace+5*time.Second {
		t.Fatalf("shutdown took %s with a grace period of %s", took, grace)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("server process %d still exists after shutdown (kill 0: %v)", pid, err)
	}
}

func TestStreamableHTTPServer(t *testing.T) {
	var auth atomic.Value
	auth.Store("")
	handler := server.NewStreamableHTTPServer(newTestServer(false))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			auth.Store(a)
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h := start(t, Options{
		Servers: []ServerConfig{{
			Name:    "web",
			URL:     srv.URL + "/mcp",
			Headers: map[string]string{"Authorization": "Bearer test-token"},
		}},
		CallTimeout: 500 * time.Millisecond,
	})
	got, err := callTool(t, h.tool("web", "web__echo"), map[string]any{"text": "over http"})
	if err != nil || got != "echo: over http" {
		t.Fatalf("echo: %q %v", got, err)
	}
	if auth.Load() != "Bearer test-token" {
		t.Fatalf("Authorization header = %q", auth.Load())
	}
	if _, err := callTool(t, h.tool("web", "web__hang"), nil); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("hang: %v", err)
	}
	if _, err := callTool(t, h.tool("web", "web__fail"), nil); err == nil || !strings.Contains(err.Error(), "widget not found") {
		t.Fatalf("fail: %v", err)
	}
	if _, err := callTool(t, h.tool("web", "web__grow"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := callTool(t, h.tool("web", "web__added"), nil); err != nil || got != "I am new" {
		t.Fatalf("added: %q %v", got, err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, servers := range [][]ServerConfig{
		{{Name: "", Command: "x"}},
		{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}},
		{{Name: "a"}},
		{{Name: "a", Command: "x", URL: "http://x"}},
	} {
		if err := NewManager(Options{Servers: servers}).Run(t.Context()); err == nil {
			t.Errorf("Run(%+v) = nil, want an error", servers)
		}
	}
}

func TestHTTPServerGoneIsNoticed(t *testing.T) {
	srv := httptest.NewServer(server.NewStreamableHTTPServer(newTestServer(false)))
	t.Cleanup(srv.Close)
	h := start(t, Options{
		Servers:        []ServerConfig{{Name: "web", URL: srv.URL + "/mcp"}},
		HealthInterval: 100 * time.Millisecond,
		CallTimeout:    time.Second,
	})
	old := h.tool("web", "web__echo")
	srv.CloseClientConnections()
	srv.Close()
	h.waitFor("tools withdrawn", func() bool {
		hist := h.history["web"]
		return len(hist) >= 2 && hist[1] == -1
	})
	if _, err := callTool(t, old, map[string]any{"text": "x"}); !errors.Is(err, ErrServerDown) {
		t.Fatalf("call after the server went away: %v, want ErrServerDown", err)
	}
	h.waitFor("reconnect failure logged", func() bool {
		return strings.Contains(h.logs.String(), "failed to start")
	})
}
