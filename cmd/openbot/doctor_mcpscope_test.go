package main

import (
	"io"
	"strings"
	"testing"

	"openbot/config"
)

// TestDoctorMCPScope: doctor warns about a stdio MCP server given the
// workspace root, or a directory above it, in an argument or environment
// value (it sees every thread's files); a server scoped with {workspace}, one
// given another directory and a url server get no warning.
func TestDoctorMCPScope(t *testing.T) {
	cases := []struct {
		name string
		srv  config.MCPServer
		want string // "WARN", "OK" or "" (no scope line)
	}{
		{"root as argument", config.MCPServer{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "./data/workspace"}}, "WARN"},
		{"root with a trailing slash", config.MCPServer{Name: "fs", Command: "srv", Args: []string{"data/workspace/"}}, "WARN"},
		{"a parent in a flag", config.MCPServer{Name: "fs", Command: "srv", Args: []string{"--root=./data"}}, "WARN"},
		{"root in the environment", config.MCPServer{Name: "fs", Command: "srv", Env: map[string]string{"ROOT": "./data/workspace"}}, "WARN"},
		{"scoped", config.MCPServer{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "{workspace}"}}, "OK"},
		{"another directory", config.MCPServer{Name: "docs", Command: "srv", Args: []string{"./docs", "-v"}}, ""},
		{"one thread's folder", config.MCPServer{Name: "fs", Command: "srv", Args: []string{"./data/workspace/thread-1"}}, ""},
		{"url server", config.MCPServer{Name: "web", URL: "https://mcp.example.com/mcp"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &doctor{cfg: &config.Config{Workspace: "./data/workspace"}, out: io.Discard}
			d.mcpScope(tc.srv)
			got := ""
			for _, l := range d.lines {
				if strings.HasSuffix(l.Name, " scope") {
					got = l.Status
					if l.Status == checkWarn && (!strings.Contains(l.Detail, "every thread's files") || !strings.Contains(l.Fix, "{workspace}")) {
						t.Errorf("warning %+v does not say what it sees and what to do", l)
					}
				}
			}
			if got != tc.want {
				t.Errorf("scope check = %q, want %q (%+v)", got, tc.want, d.lines)
			}
		})
	}
}
