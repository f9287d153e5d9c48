package tools

import (
	"encoding/json"
	"testing"

	"openbot/agents"
)

// TestRepeatSafety: the built-ins say which calls may run again after a restart
// interrupted them (DESIGN.md §8): reads, a whole-file write, the todo list and
// a GET do; shell, an append, post_message and a call that sends data do not.
func TestRepeatSafety(t *testing.T) {
	tools := builtins(t, Options{WorkspaceRoot: t.TempDir(), Sandbox: SandboxNone})
	cases := []struct {
		tool, args string
		want       bool
	}{
		{"workspace_read", `{"path":"a.txt"}`, true},
		{"workspace_list", `{}`, true},
		{"workspace_search", `{"query":"x"}`, true},
		{"workspace_write", `{"path":"a.txt","content":"x"}`, true},
		{"workspace_write", `{"path":"a.txt","content":"x","append":true}`, false},
		{"workspace_write", `{"path":`, false},
		{"todo_write", `{"items":[]}`, true},
		{"http_fetch", `{"url":"https://example.com"}`, true},
		{"http_fetch", `{"url":"https://example.com","method":"HEAD"}`, true},
		{"http_fetch", `{"url":"https://example.com","method":"POST","body":"x"}`, false},
		{"shell", `{"command":"ls"}`, false},
		{"post_message", `{"text":"hi"}`, false},
	}
	for _, c := range cases {
		tl, ok := tools[c.tool]
		if !ok {
			t.Fatalf("no tool %s", c.tool)
		}
		rs, ok := tl.(agents.RepeatSafer)
		got := ok && rs.RepeatSafe(json.RawMessage(c.args))
		if got != c.want {
			t.Errorf("%s %s: repeat-safe = %v, want %v", c.tool, c.args, got, c.want)
		}
	}
}
