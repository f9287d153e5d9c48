package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReloadRefusesAnotherConfigFile: the pid file names the config file the
// server runs with; `openbot reload --config B` for a server started with A is
// refused with a message naming A, and a pid file whose pid now belongs to a
// process started at another time (a reused pid) is refused as stale.
func TestReloadRefusesAnotherConfigFile(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "data", "openbot.db")
	if err := os.MkdirAll(filepath.Dir(store), 0o700); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	remove, err := writePidFile(store, a)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if pid, err := servingPid(store, a); err != nil || pid != os.Getpid() {
		t.Fatalf("servingPid(A) = %d, %v; want this process", pid, err)
	}
	_, err = servingPid(store, b)
	if err == nil || !strings.Contains(err.Error(), a) {
		t.Fatalf("servingPid(B) = %v; want a refusal naming %s", err, a)
	}

	if procStart(os.Getpid()) == "" {
		t.Skip("no /proc: the start time is not checked")
	}
	stale := strconv.Itoa(os.Getpid()) + "\n" + a + "\n1\n"
	if err := os.WriteFile(pidFilePath(store), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := servingPid(store, a); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("servingPid of a reused pid = %v; want a stale-file refusal", err)
	}
}
