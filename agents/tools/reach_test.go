package tools

import (
	"strings"
	"testing"

	"openbot/agents"
)

// TestEveryBuiltinSaysWhatItReaches: every built-in tool can be put in
// approval_tools, so every one implements agents.Reacher with a sentence for
// the approval prompt (DESIGN.md §5), and the file tools name the workspace.
func TestEveryBuiltinSaysWhatItReaches(t *testing.T) {
	list, err := Builtins(Options{WorkspaceRoot: t.TempDir(), Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no built-in tools")
	}
	want := map[string]string{
		"workspace_read":   "reads files only inside this thread's workspace",
		"workspace_write":  "writes files only inside this thread's workspace",
		"workspace_list":   "lists files only inside this thread's workspace",
		"workspace_search": "searches files only inside this thread's workspace",
		"todo_write":       "todo list",
		"post_message":     "posts a message into this thread",
		"shell":            "WITHOUT a sandbox",
		"http_fetch":       "public internet",
	}
	for _, tl := range list {
		r, ok := tl.(agents.Reacher)
		if !ok {
			t.Errorf("%s does not implement agents.Reacher", tl.Name())
			continue
		}
		got := r.Reach("engineer")
		if w, known := want[tl.Name()]; strings.TrimSpace(got) == "" || (known && !strings.Contains(got, w)) {
			t.Errorf("%s: Reach = %q, want a sentence containing %q", tl.Name(), got, want[tl.Name()])
		}
	}

	shared := builtins(t, Options{WorkspaceRoot: t.TempDir(), SharedWorkspace: true})
	if r, ok := shared["workspace_write"].(agents.Reacher); !ok || !strings.Contains(r.Reach("engineer"), "@engineer's workspace, which all its threads share") {
		t.Errorf("shared workspace: workspace_write does not name the bot's shared workspace")
	}
}
