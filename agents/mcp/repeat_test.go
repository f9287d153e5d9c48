package mcp

import (
	"testing"

	"openbot/agents"
)

// TestRepeatSafeFromConfig: an MCP tool may run again after a restart
// interrupted it only when its server is configured idempotent
// (ServerConfig.Idempotent, DESIGN.md §8).
func TestRepeatSafeFromConfig(t *testing.T) {
	plain := stdioServer(t, "alpha", "ok", nil)
	idem := stdioServer(t, "beta", "ok", nil)
	idem.Idempotent = true
	h := start(t, Options{Servers: []ServerConfig{plain, idem}})
	for server, want := range map[string]bool{"alpha": false, "beta": true} {
		tl := h.tool(server, server+"__echo")
		rs, ok := tl.(agents.RepeatSafer)
		if got := ok && rs.RepeatSafe(nil); got != want {
			t.Errorf("%s: repeat-safe = %v, want %v", server, got, want)
		}
	}
}
