package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openbot/store/bolt"
)

// `openbot store compact` rewrites the configured store and says by how much.
func TestStoreCompactCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "data", "openbot.db")
	st, err := bolt.Open(db, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	path := filepath.Join(dir, "config.yaml")
	cfg := "llm:\n  default: {base_url: \"http://127.0.0.1:1/v1\", model: m}\nbots:\n  - {handle: a}\nstore: {path: " + db + "}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"store", "compact", "--config", path}, strings.NewReader(""), nil)
	if r.code != 0 || !strings.Contains(r.stdout, "compacted "+db+": ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := runFor(t, []string{"store", "shrink"}, strings.NewReader(""), nil); r.code != exitUsage {
		t.Errorf("unknown store subcommand: exit %d", r.code)
	}
}
