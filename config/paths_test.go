package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadResolvesPathsFromTheFile: relative store.path and workspace are taken
// from the config file's directory, not the working directory, so `openbot
// reload` (or any command) run from elsewhere finds the same store; absolute
// paths are kept.
func TestLoadResolvesPathsFromTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	text := "llm: {default: {model: m, api_key: k, base_url: 'http://127.0.0.1:1/v1'}}\nbots: [{handle: a, llm: default}]\nstore: {path: ./data/x.db}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "data", "x.db"); cfg.Store.Path != want {
		t.Errorf("store.path = %q, want %q", cfg.Store.Path, want)
	}
	if want := filepath.Join(dir, "data", "workspace"); cfg.Workspace != want {
		t.Errorf("workspace (default) = %q, want %q", cfg.Workspace, want)
	}
	abs := filepath.Join(t.TempDir(), "y.db")
	if err := os.WriteFile(path, []byte(text+"workspace: "+abs+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = Load(path, nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Workspace != abs {
		t.Errorf("absolute workspace = %q, want it kept as %q", cfg.Workspace, abs)
	}
}
