package mcp

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"openbot/agents"
)

// TestToolReach: an MCP tool's approval prompt names its server and where it
// runs (the command's base name, or the URL's host) and that what it can reach
// is up to that server; it never shows the URL's credentials, path or query.
func TestToolReach(t *testing.T) {
	srv := httptest.NewServer(server.NewStreamableHTTPServer(newTestServer(false)))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	h := start(t, Options{Servers: []ServerConfig{
		stdioServer(t, "alpha", "ok", nil),
		{Name: "web", URL: "http://robot:s3cret-pass@" + host + "/mcp?api_key=k-4821"},
	}})
	exe, _ := os.Executable()
	for _, tt := range []struct {
		server, tool, want string
	}{
		{"alpha", "alpha__echo", "calls the MCP server alpha (command " + filepath.Base(exe) + ") — what it can reach is up to that server"},
		{"web", "web__echo", "calls the MCP server web (" + host + ") — what it can reach is up to that server"},
	} {
		r, ok := h.tool(tt.server, tt.tool).(agents.Reacher)
		if !ok {
			t.Fatalf("%s does not implement agents.Reacher", tt.tool)
		}
		if got := r.Reach("engineer"); got != tt.want {
			t.Errorf("%s: Reach = %q, want %q", tt.tool, got, tt.want)
		}
	}
	got := h.tool("web", "web__echo").(agents.Reacher).Reach("engineer")
	for _, secret := range []string{"robot", "s3cret", "k-4821", "/mcp"} {
		if strings.Contains(got, secret) {
			t.Errorf("Reach %q shows %q", got, secret)
		}
	}
	if w := where(ServerConfig{URL: "::not a url"}); w != "" {
		t.Errorf("where(bad URL) = %q, want empty", w)
	}
}
