package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"openbot/agents"
	"openbot/config"
)

func echoMCP(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("reload-test", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo"), mcp.WithString("text")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestMCPSetReload: a reload adds an MCP server (its tools appear and runs wait
// for it), restarts a changed one and removes a dropped one (its tools go and no
// run waits for it any more), while the other servers keep running.
func TestMCPSetReload(t *testing.T) {
	reg := agents.NewRegistry()
	url := echoMCP(t)
	keep := config.MCPServer{Name: "keep", URL: url}
	set := newMCPSet(&config.Config{MCPServers: []config.MCPServer{keep}}, reg, slog.New(slog.DiscardHandler), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- set.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	ready := func(source string) {
		t.Helper()
		if un := reg.WaitReady(ctx, []string{source}, 20*time.Second); len(un) != 0 {
			t.Fatalf("%s not ready: %v", source, un)
		}
		if _, ok := reg.Get(source + "__echo"); !ok {
			t.Fatalf("%s__echo is not registered", source)
		}
	}
	ready("keep")

	added := config.MCPServer{Name: "added", URL: url}
	changes, err := set.Apply(ctx, []config.MCPServer{keep, added})
	if err != nil || !slices.Equal(changes, []string{"mcp server added added"}) {
		t.Fatalf("Apply add = %q, %v", changes, err)
	}
	ready("added")

	changed := added
	changed.Headers = map[string]string{"X-Test": "1"}
	changes, err = set.Apply(ctx, []config.MCPServer{keep, changed})
	if err != nil || !slices.Equal(changes, []string{"mcp server added changed: restarted"}) {
		t.Fatalf("Apply change = %q, %v", changes, err)
	}
	ready("added")

	changes, err = set.Apply(ctx, []config.MCPServer{keep})
	if err != nil || !slices.Equal(changes, []string{"mcp server added removed"}) {
		t.Fatalf("Apply remove = %q, %v", changes, err)
	}
	if _, ok := reg.Get("added__echo"); ok {
		t.Fatal("a removed server's tool is still registered")
	}
	if declared, _, _ := reg.SourceStatus("added"); declared {
		t.Fatal("a removed server is still a declared tool source")
	}
	if _, ok := reg.Get("keep__echo"); !ok {
		t.Fatal("the kept server lost its tools")
	}
}
