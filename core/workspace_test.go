package core_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"openbot/core"
)

// TestOpenSavedReadsOnlyRegularFiles: OpenSaved reads a regular file of the
// workspace and refuses a symbolic link (even one to a file inside) and a
// directory; OpenWorkspace refuses a workspace that is a link.
func TestOpenSavedReadsOnlyRegularFiles(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "inbox", "1"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "inbox", "1", "note.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("note.txt", filepath.Join(ws, "inbox", "1", "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "inbox", "1", "dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	root, err := core.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, st, err := core.OpenSaved(root, "inbox/1/note.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(b) != "hello" || st.Size() != 5 {
		t.Errorf("read %q (%d bytes) %v", b, st.Size(), err)
	}
	for _, name := range []string{"inbox/1/link.txt", "inbox/1/dir"} {
		if f, _, err := core.OpenSaved(root, name); !errors.Is(err, core.ErrWorkspaceLink) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenSaved(%s) = %v, want ErrWorkspaceLink", name, err)
		}
	}
	if err := os.Symlink(ws, filepath.Join(base, "linked")); err != nil {
		t.Fatal(err)
	}
	if r, err := core.OpenWorkspace(filepath.Join(base, "linked")); !errors.Is(err, core.ErrWorkspaceLink) {
		if r != nil {
			r.Close()
		}
		t.Errorf("OpenWorkspace(a link) = %v, want ErrWorkspaceLink", err)
	}
}
