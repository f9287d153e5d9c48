package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestStartSaysSoThenRunsOpenbot: `go run ./cmd/start version`, the README's
// way in, prints its line before anything is built, then runs openbot with
// the arguments given.
func TestStartSaysSoThenRunsOpenbot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds openbot")
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	caches, err := exec.Command(goCmd, "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	gocache, modcache, _ := strings.Cut(strings.TrimSpace(string(caches)), "\n")
	cmd := exec.Command(goCmd, "run", ".", "version")
	// The binary goes to a new cache directory; Go's own caches stay where
	// they are (they follow XDG_CACHE_HOME otherwise).
	cmd.Env = append(cmd.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "GOCACHE="+gocache, "GOMODCACHE="+modcache)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./cmd/start version: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	first, _, _ := strings.Cut(stderr.String(), "\n")
	if !strings.HasPrefix(first, "openbot: building ./cmd/openbot") {
		t.Errorf("the first line on stderr is %q, want start's own line", first)
	}
	if !strings.HasPrefix(stdout.String(), "openbot ") {
		t.Errorf("stdout = %q, want openbot's version", stdout.String())
	}
}
