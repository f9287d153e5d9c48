package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A hard link made from outside into the workspace reaches a file outside it;
// the file tools must neither read nor write it.
func TestWorkspaceToolsRefuseHardLinks(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("outside-secret-4821\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := builtins(t, Options{WorkspaceRoot: root})
	if _, err := call(t, tl["workspace_write"], nil, map[string]any{"path": "own.txt", "content": "mine\n"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(root, "thread-7", "linked.txt")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}

	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"workspace_read", map[string]any{"path": "linked.txt"}},
		{"workspace_write", map[string]any{"path": "linked.txt", "content": "overwritten"}},
		{"workspace_write", map[string]any{"path": "linked.txt", "content": "appended", "append": true}},
		{"workspace_list", map[string]any{"path": "linked.txt"}},
	} {
		got, err := call(t, tl[tc.tool], nil, tc.args)
		if !errors.Is(err, ErrHardLink) {
			t.Errorf("%s %v = %q, %v; want ErrHardLink", tc.tool, tc.args, got, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside-secret-4821\n" {
		t.Errorf("the outside file changed to %q", b)
	}

	got, err := call(t, tl["workspace_list"], nil, map[string]any{})
	if err != nil || !strings.Contains(got, "linked.txt (hard link") || !strings.Contains(got, "own.txt (5 bytes)") {
		t.Errorf("list = %q, %v", got, err)
	}
	got, err = call(t, tl["workspace_search"], nil, map[string]any{"pattern": "outside-secret"})
	if err != nil || got != "no matches" {
		t.Errorf("search = %q, %v; want no matches", got, err)
	}
	// The workspace's own files still work.
	if got, err := call(t, tl["workspace_read"], nil, map[string]any{"path": "own.txt"}); err != nil || got != "mine\n" {
		t.Errorf("read own.txt = %q, %v", got, err)
	}
}

// TestThreadWorkspaceLinkRefused: a thread's directory that is a symbolic link
// (planted by a sandbox that can write the workspace root) is refused by the
// file tools and the shell, so neither reaches where it points.
func TestThreadWorkspaceLinkRefused(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "thread-7")); err != nil {
		t.Fatal(err)
	}
	tl := builtins(t, Options{WorkspaceRoot: root, Sandbox: SandboxNone})
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"workspace_read", map[string]any{"path": "secret.txt"}},
		{"workspace_write", map[string]any{"path": "new.txt", "content": "planted"}},
		{"workspace_list", map[string]any{}},
		{"shell", map[string]any{"command": "cat secret.txt"}},
	} {
		got, err := call(t, tl[tc.tool], nil, tc.args)
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("%s %v = %q, %v; want ErrOutsideWorkspace", tc.tool, tc.args, got, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside holds %d entries, want only secret.txt", len(entries))
	}
}
