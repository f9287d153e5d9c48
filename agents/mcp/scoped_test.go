package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"openbot/agents"
	"openbot/core"
)

// scopedServer is the "ws" test server scoped to the thread's workspace, by
// its argument and by its environment.
func scopedServer(t *testing.T) ServerConfig {
	cfg := stdioServer(t, "fs", "ws", map[string]string{envRoot: WorkspacePlaceholder})
	cfg.Args = []string{WorkspacePlaceholder}
	return cfg
}

// threadWorkspaces returns a Workspace resolver over root ("<root>/thread-<id>",
// created on use), as the built-in file tools lay them out.
func threadWorkspaces(root string) func(agents.ToolCall) (string, error) {
	return func(call agents.ToolCall) (string, error) {
		dir := filepath.Join(root, "thread-"+strconv.FormatUint(uint64(call.Thread), 10))
		return dir, os.MkdirAll(dir, 0o750)
	}
}

// callIn calls tl as a run of thread would.
func callIn(t *testing.T, tl agents.Tool, thread core.ThreadID) (string, error) {
	t.Helper()
	return tl.Call(context.Background(), agents.ToolCall{Args: json.RawMessage(`{}`), Thread: thread, Run: 1})
}

// alive reports whether process pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestScopedServerSeesOnlyItsThread: a server with {workspace} in its argument
// and environment runs once per thread workspace; each thread's calls see that
// thread's files only, never the workspace root or another thread's; the tool
// list comes from a process on an empty directory; the processes are bounded
// (a new workspace replaces the least recently used idle one) and stop with
// the Manager.
func TestScopedServerSeesOnlyItsThread(t *testing.T) {
	root := t.TempDir()
	for thread, file := range map[int]string{1: "one.txt", 2: "two.txt"} {
		dir := filepath.Join(root, fmt.Sprintf("thread-%d", thread))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := start(t, Options{Servers: []ServerConfig{scopedServer(t)}, Workspace: threadWorkspaces(root), MaxScoped: 2})
	list, where, pid := h.tool("fs", "fs__list"), h.tool("fs", "fs__root"), h.tool("fs", "fs__pid")
	if r, ok := list.(agents.Reacher); !ok || !strings.Contains(r.Reach("engineer"), "this thread's workspace") {
		t.Errorf("reach does not say the server is scoped")
	}
	for thread, want := range map[core.ThreadID]string{1: "one.txt", 2: "two.txt", 3: ""} {
		got, err := callIn(t, list, thread)
		if err != nil || got != want {
			t.Errorf("thread %d lists %q, %v; want %q", thread, got, err, want)
		}
	}
	// Threads 1, 2, 3 with at most 2 processes: thread 1's was replaced.
	if n := h.m.scoped.size("fs"); n != 2 {
		t.Errorf("%d processes, want at most 2", n)
	}
	got, err := callIn(t, where, 2)
	if dir := filepath.Join(root, "thread-2"); err != nil || got != dir+"|"+dir {
		t.Errorf("thread 2's server root = %q, %v; want its workspace in the argument and the environment", got, err)
	}
	p1, err1 := callIn(t, pid, 1)
	p2, err2 := callIn(t, pid, 2)
	p2again, _ := callIn(t, pid, 2)
	if err1 != nil || err2 != nil || p1 == p2 || p2 != p2again {
		t.Fatalf("pids: thread 1 %q (%v), thread 2 %q then %q (%v); want one process per thread, kept", p1, err1, p2, p2again, err2)
	}
	h.stop()
	for _, p := range []string{p1, p2} {
		n, _ := strconv.Atoi(p)
		if alive(n) {
			t.Errorf("process %d of a thread is still running after the Manager stopped", n)
		}
	}
}

// TestScopedServerIdleStops: a thread's process that goes without a call for
// ScopedIdle is stopped; the next call starts a new one.
func TestScopedServerIdleStops(t *testing.T) {
	h := start(t, Options{Servers: []ServerConfig{scopedServer(t)}, Workspace: threadWorkspaces(t.TempDir()), ScopedIdle: 100 * time.Millisecond})
	pid := h.tool("fs", "fs__pid")
	first, err := callIn(t, pid, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor("the idle process to stop", func() bool { return h.m.scoped.size("fs") == 0 })
	n, _ := strconv.Atoi(first)
	h.waitFor("the idle process to exit", func() bool { return !alive(n) })
	again, err := callIn(t, pid, 1)
	if err != nil || again == first {
		t.Fatalf("after the idle stop: %q, %v; want a new process", again, err)
	}
}

// TestScopedServerNeedsWorkspace: a scoped server without a workspace
// resolver is a configuration error of Run; a resolver's error refuses the
// call before any process starts.
func TestScopedServerNeedsWorkspace(t *testing.T) {
	m := NewManager(Options{Servers: []ServerConfig{scopedServer(t)}})
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Fatalf("Run = %v, want an error about the workspace", err)
	}
	h := start(t, Options{Servers: []ServerConfig{scopedServer(t)},
		Workspace: func(agents.ToolCall) (string, error) { return "", errors.New("no workspace here") }})
	if _, err := callIn(t, h.tool("fs", "fs__list"), 1); !errors.Is(err, agents.ErrNotRun) {
		t.Fatalf("call = %v, want a refusal that did not run", err)
	}
	if n := h.m.scoped.size("fs"); n != 0 {
		t.Errorf("%d processes started", n)
	}
}
