package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

// fileEnv is a fakeEnv that implements core.FilePoster.
type fileEnv struct {
	fakeEnv
	posted   []string
	captions []string
}

func (e *fileEnv) PostFile(_ context.Context, abs, caption string) (core.MessageID, error) {
	e.posted = append(e.posted, abs)
	e.captions = append(e.captions, caption)
	return 42, nil
}

func TestSendFileStagesACopyOutsideTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "ws")
	tl := builtins(t, Options{WorkspaceRoot: root, Sandbox: SandboxNone})["send_file"]
	ws := filepath.Join(root, "thread-7")
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "out", "report.md"), []byte("# report"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(ws, "link.txt"))

	env := &fileEnv{}
	out, err := call(t, tl, env, map[string]any{"path": "out/report.md", "caption": " weekly "})
	if err != nil {
		t.Fatalf("send_file: %v", err)
	}
	if !strings.Contains(out, "message 42") || len(env.posted) != 1 || env.captions[0] != "weekly" {
		t.Fatalf("out %q posted %v captions %q", out, env.posted, env.captions)
	}
	staged := env.posted[0]
	if strings.HasPrefix(staged, root+string(filepath.Separator)) || filepath.Base(staged) != "report.md" {
		t.Errorf("staged at %s, want a copy named report.md outside the workspace root %s", staged, root)
	}
	if b, _ := os.ReadFile(staged); string(b) != "# report" {
		t.Errorf("staged content %q", b)
	}
	for _, bad := range []string{"../secret.txt", "/etc/passwd", "link.txt", "out", "missing.txt"} {
		if _, err := call(t, tl, env, map[string]any{"path": bad}); err == nil {
			t.Errorf("send_file %q: want an error", bad)
		}
	}
	if len(env.posted) != 1 {
		t.Errorf("refused paths were posted: %v", env.posted)
	}
	if _, err := call(t, tl, &fakeEnv{}, map[string]any{"path": "out/report.md"}); err == nil {
		t.Error("send_file without a FilePoster env: want an error")
	}
}

func TestSendFilePrunesOldStagedCopies(t *testing.T) {
	dir := t.TempDir()
	ws := &workspace{opts: Options{WorkspaceRoot: filepath.Join(dir, "ws"), OutboxDir: filepath.Join(dir, "out")}}
	old, fresh := filepath.Join(dir, "out", "run-1-old"), filepath.Join(dir, "out", "run-2-new")
	for _, d := range []string{old, fresh} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	ws.pruneStaged(time.Now())
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old staged copy kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh staged copy removed: %v", err)
	}
}
