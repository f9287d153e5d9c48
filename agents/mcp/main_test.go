package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"openbot/agents"
	"openbot/internal/runtest"
)

// The test binary doubles as the stdio MCP servers of the tests: with
// OPENBOT_MCP_TEST_SERVER set it serves instead of running tests.
const (
	envMode    = "OPENBOT_MCP_TEST_SERVER"
	envPidFile = "OPENBOT_MCP_TEST_PIDFILE"
	// envGate names a named pipe the "gated" server opens before it serves: the
	// test decides when a slow server becomes ready (openGate).
	envGate = "OPENBOT_MCP_TEST_GATE"
	// envCount names a file the "count" tool appends one line to per call.
	envCount = "OPENBOT_MCP_TEST_COUNT"
	// envRoot is the "ws" server's root as its environment says it.
	envRoot = "OPENBOT_MCP_TEST_ROOT"
)

// newWorkspaceServer serves "list" (the names in root, its argument), "root"
// (root, as the argument and the environment gave it) and "pid".
func newWorkspaceServer(root, envRoot string) *server.MCPServer {
	s := server.NewMCPServer("openbot-test-ws", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("list", mcp.WithDescription("List the root directory")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			es, err := os.ReadDir(root)
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			var names []string
			for _, e := range es {
				names = append(names, e.Name())
			}
			return mcp.NewToolResultText(strings.Join(names, ",")), nil
		})
	s.AddTool(mcp.NewTool("root", mcp.WithDescription("Say the root")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(root + "|" + envRoot), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("Say the process id")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	return s
}

func TestMain(m *testing.M) {
	mode := os.Getenv(envMode)
	if mode == "" {
		os.Exit(m.Run())
	}
	if f := os.Getenv(envPidFile); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	}
	switch mode {
	case "ok":
		_ = server.ServeStdio(newTestServer(true))
	case "ws": // a file server on the directory of its first argument
		_ = server.ServeStdio(newWorkspaceServer(os.Args[1], os.Getenv(envRoot)))
	case "gated": // a server slow to start: it serves once the gate is open
		// Opening a named pipe for reading blocks until it has a writer (openGate).
		if f, err := os.Open(os.Getenv(envGate)); err == nil {
			f.Close()
		}
		_ = server.ServeStdio(newTestServer(true))
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: MYSERVICE_TOKEN is not set")
		os.Exit(2)
	case "stubborn": // ignores end of input and SIGTERM
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		_ = server.NewStdioServer(newTestServer(true)).Listen(context.Background(), os.Stdin, os.Stdout)
		// Stay alive after the end of input: what the test stops is a process
		// that does not exit on its own (select{} would be a deadlock to the runtime).
		time.Sleep(time.Hour) // the helper process outlives its input until the test kills it
	}
	os.Exit(0)
}

// newTestServer is the MCP server of the tests, over stdio or streamable HTTP.
func newTestServer(stdio bool) *server.MCPServer {
	s := server.NewMCPServer("openbot-test", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Echo the text back"),
		mcp.WithString("text", mcp.Required(), mcp.Description("what to echo"))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("hang", mcp.WithDescription("Never answers")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Hour):
			}
			return nil, errors.New("gave up")
		})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("bad input: widget not found"), nil
		})
	s.AddTool(mcp.NewTool("big", mcp.WithDescription("A long result")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(string(bytes.Repeat([]byte("x"), 5000))), nil
		})
	s.AddTool(mcp.NewTool("dotted.name", mcp.WithDescription("A name needing sanitizing")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("dotted"), nil
		})
	s.AddTool(mcp.NewTool("grow", mcp.WithDescription("Adds the tool 'added'")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("added", mcp.WithDescription("Added at run time")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("I am new"), nil
				})
			return mcp.NewToolResultText("grown"), nil
		})
	s.AddTool(mcp.NewTool("huge", mcp.WithDescription("A result far over every cap")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(string(bytes.Repeat([]byte("y"), hugeResult))), nil
		})
	s.AddTool(mcp.NewTool("tasky", mcp.WithDescription("Must be called as a task"), mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("a task tool called directly"), nil
		})
	s.AddTool(mcp.NewTool("count", mcp.WithDescription("Counts its calls in a file")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f, err := os.OpenFile(os.Getenv(envCount), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			defer f.Close()
			if _, err := f.WriteString("called\n"); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText("counted"), nil
		})
	if stdio {
		s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Exits the server")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3)
				return nil, nil
			})
	}
	return s
}

// hugeResult is the size in bytes of the "huge" tool's result.
const hugeResult = 100000

// stdioServer is a ServerConfig running this test binary in mode.
func stdioServer(t *testing.T, name, mode string, env map[string]string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{envMode: mode}
	for k, v := range env {
		e[k] = v
	}
	return ServerConfig{Name: name, Command: exe, Env: e}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = runtest.Buffer

// harness runs a Manager and records what it publishes.
type harness struct {
	t       *testing.T
	m       *Manager
	logs    *syncBuffer
	mu      sync.Mutex
	tools   map[string]map[string]agents.Tool
	history map[string][]int // tool counts published per server, nil as -1
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		logs:    &syncBuffer{},
		tools:   map[string]map[string]agents.Tool{},
		history: map[string][]int{},
		changed: make(chan struct{}, 1),
		done:    make(chan error, 1),
	}
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.OnTools = func(server string, tools []agents.Tool) {
		h.mu.Lock()
		if tools == nil {
			delete(h.tools, server)
			h.history[server] = append(h.history[server], -1)
		} else {
			byName := map[string]agents.Tool{}
			for _, tl := range tools {
				byName[tl.Name()] = tl
			}
			h.tools[server] = byName
			h.history[server] = append(h.history[server], len(tools))
		}
		h.mu.Unlock()
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	if opts.RestartMin == 0 {
		opts.RestartMin = 50 * time.Millisecond
		opts.RestartMax = 200 * time.Millisecond
	}
	h.m = NewManager(opts)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("manager log:\n%s", h.logs.String())
		}
	})
	return h
}

// stop cancels Run and waits for it; it returns how long that took.
func (h *harness) stop() time.Duration {
	begin := time.Now()
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
		h.done <- nil // let a later stop return too
	case <-time.After(30 * time.Second):
		h.t.Fatal("Run did not return after cancel")
	}
	return time.Since(begin)
}

// waitFor polls cond (under h.mu) until it holds or the deadline passes.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// tool waits for server's tool name and returns it.
func (h *harness) tool(server, name string) agents.Tool {
	h.t.Helper()
	var tl agents.Tool
	h.waitFor(name, func() bool {
		tl = h.tools[server][name]
		return tl != nil
	})
	return tl
}

func callTool(t *testing.T, tl agents.Tool, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Call(context.Background(), agents.ToolCall{Args: raw})
}
