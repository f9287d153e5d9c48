package tools

import (
	"errors"
	"openbot/agents"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func setupWorkspace(t *testing.T) (opts Options, ws, outside string) {
	t.Helper()
	root := t.TempDir()
	outside = t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOPSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(root, "thread-7")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ws, "sub", "notes.txt"), []byte("alpha\nbeta needle\ngamma\n"), 0o640))
	must(os.Symlink(outside, filepath.Join(ws, "outdir")))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "outfile")))
	must(os.Symlink("../../", filepath.Join(ws, "sub", "up")))
	must(os.Symlink("sub", filepath.Join(ws, "inlink")))
	return Options{WorkspaceRoot: root}, ws, outside
}

func TestWorkspaceToolsRefuseEscapes(t *testing.T) {
	opts, _, outside := setupWorkspace(t)
	tl := builtins(t, opts)
	escapes := []string{
		"../x",
		"../../../../etc/passwd",
		"sub/../../x",
		"/etc/passwd",
		filepath.Join(outside, "secret.txt"),
		"outfile",
		"outdir",
		"outdir/secret.txt",
		"outdir/new.txt",
		"sub/up/x",
		"inlink/up/secret.txt",
	}
	for _, p := range escapes {
		cases := map[string]map[string]any{
			"workspace_read":   {"path": p},
			"workspace_write":  {"path": p, "content": "pwned"},
			"workspace_list":   {"path": p},
			"workspace_search": {"pattern": "SECRET", "path": p},
		}
		for name, args := range cases {
			t.Run(name+"/"+p, func(t *testing.T) {
				got, err := call(t, tl[name], nil, args)
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("error %q, want ErrOutsideWorkspace", err)
				}
				if strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(got, "TOPSECRET") {
					t.Fatal("secret leaked")
				}
			})
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("outside dir has %d entries after writes, want 1", len(entries))
	}
	b, _ := os.ReadFile(filepath.Join(outside, "secret.txt"))
	if string(b) != "TOPSECRET\n" {
		t.Fatalf("outside file changed: %q", b)
	}
}

func TestWorkspaceSearchAllSkipsLinksOutside(t *testing.T) {
	opts, _, _ := setupWorkspace(t)
	tl := builtins(t, opts)
	got, err := call(t, tl["workspace_search"], nil, map[string]any{"pattern": "SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	if got != "no matches" {
		t.Fatalf("got %q, want no matches", got)
	}
}

func TestWorkspaceReadWriteListSearch(t *testing.T) {
	opts, ws, _ := setupWorkspace(t)
	tl := builtins(t, opts)

	got, err := call(t, tl["workspace_write"], nil, map[string]any{"path": "a/b/c.txt", "content": "hello\n"})
	if err != nil || !strings.Contains(got, "wrote 6 bytes") {
		t.Fatalf("write: %q %v", got, err)
	}
	if _, err := call(t, tl["workspace_write"], nil, map[string]any{"path": "a/b/c.txt", "content": "world needle\n", "append": true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "a", "b", "c.txt"))
	if err != nil || string(b) != "hello\nworld needle\n" {
		t.Fatalf("file on disk: %q %v", b, err)
	}
	got, err = call(t, tl["workspace_read"], nil, map[string]any{"path": "a/b/c.txt"})
	if err != nil || got != "hello\nworld needle\n" {
		t.Fatalf("read: %q %v", got, err)
	}
	// A link that stays inside works.
	got, err = call(t, tl["workspace_read"], nil, map[string]any{"path": "inlink/notes.txt"})
	if err != nil || !strings.Contains(got, "beta needle") {
		t.Fatalf("read via inside link: %q %v", got, err)
	}
	got, err = call(t, tl["workspace_list"], nil, map[string]any{"recursive": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a/", "a/b/c.txt (19 bytes)", "sub/notes.txt (24 bytes)", "outdir -> (outside", "inlink -> sub"} {
		if !strings.Contains(got, want) {
			t.Errorf("list missing %q:\n%s", want, got)
		}
	}
	got, err = call(t, tl["workspace_search"], nil, map[string]any{"pattern": "NEEDLE", "ignore_case": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a/b/c.txt:2: world needle", "sub/notes.txt:2: beta needle"} {
		if !strings.Contains(got, want) {
			t.Errorf("search missing %q:\n%s", want, got)
		}
	}
	got, err = call(t, tl["workspace_search"], nil, map[string]any{"pattern": `^g\w+a$`, "regexp": true, "glob": "*.txt"})
	if err != nil || got != "sub/notes.txt:3: gamma" {
		t.Fatalf("regexp search: %q %v", got, err)
	}
	if _, err := call(t, tl["workspace_read"], nil, map[string]any{"path": "missing.txt"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestWorkspacePerThreadCreatedOnFirstUse(t *testing.T) {
	root := t.TempDir()
	tl := builtins(t, Options{WorkspaceRoot: root})
	got, err := call(t, tl["workspace_list"], nil, map[string]any{})
	if err != nil || got != "(empty)" {
		t.Fatalf("list: %q %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(root, "thread-7")); err != nil || !st.IsDir() {
		t.Fatalf("thread workspace not created: %v", err)
	}
}

func TestWorkspaceCaps(t *testing.T) {
	root := t.TempDir()
	tl := builtins(t, Options{WorkspaceRoot: root, ReadCap: 10, WriteCap: 20})
	if _, err := call(t, tl["workspace_write"], nil, map[string]any{"path": "big", "content": strings.Repeat("x", 21)}); err == nil {
		t.Fatal("write over the cap succeeded")
	}
	if _, err := call(t, tl["workspace_write"], nil, map[string]any{"path": "f", "content": "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	got, err := call(t, tl["workspace_read"], nil, map[string]any{"path": "f"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "0123456789\n") || !strings.Contains(got, "truncated: bytes 0-10 of 16") {
		t.Fatalf("capped read: %q", got)
	}
	got, err = call(t, tl["workspace_read"], nil, map[string]any{"path": "f", "offset": 10})
	if err != nil || got != "abcdef" {
		t.Fatalf("read at offset: %q %v", got, err)
	}
}

// TestWorkspaceReadPageFitsWhatTheModelSees: with the default caps, a page of
// a large file and its "call again with offset" note fit in one tool result
// as the model is shown it (agents.DefaultMaxToolResultChars), so the agent's
// own cut never drops the note that says how to read on.
func TestWorkspaceReadPageFitsWhatTheModelSees(t *testing.T) {
	root := t.TempDir()
	tl := builtins(t, Options{WorkspaceRoot: root})
	big := strings.Repeat("line of a long file 0123456789\n", 2000) // 62,000 bytes
	if err := os.MkdirAll(filepath.Join(root, "thread-7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "thread-7", "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := call(t, tl["workspace_read"], nil, map[string]any{"path": "big.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > agents.DefaultMaxToolResultChars || !strings.Contains(got, "call again with offset") {
		t.Fatalf("a page of %d bytes (the model is shown %d), ends %q; want it to fit with its note",
			len(got), agents.DefaultMaxToolResultChars, got[max(0, len(got)-120):])
	}
}
