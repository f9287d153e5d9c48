package tools

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireBwrap skips the test when bubblewrap is not installed, except in CI
// (CI=true), where a missing bwrap fails the test: the sandbox tests must run.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bwrap is not installed (CI=true): install bubblewrap: %v", err)
		}
		t.Skip("bwrap is not installed")
	}
}

// sleepMarker returns a unique duration for `sleep`, so the test can find
// that process on the host whatever pid namespace it runs in.
func sleepMarker() string {
	return strconv.Itoa(300000 + rand.IntN(600000))
}

// sleepPids returns the live (not zombie) host processes whose command line
// is exactly "sleep <marker>".
func sleepPids(marker string) []int {
	want := []byte("sleep\x00" + marker + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Equal(b, want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// state follows "pid (comm) ": the field after the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitSleeps waits until want holds for the number of live "sleep <marker>"
// processes, or fails the test after 10 s naming what. These processes are not
// the test's children (a shell, a sandbox or a killed stand-in started them) and
// nothing signals that one has exec'd or died, so /proc is read every 10 ms:
// the one sleep of these tests, a poll of process state, not a pause.
func waitSleeps(t *testing.T, marker, what string, want func(n int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !want(len(sleepPids(marker))) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: sleep %s processes %v", what, marker, sleepPids(marker))
		}
		time.Sleep(10 * time.Millisecond) // a poll of /proc: nothing signals an exec or an exit
	}
}

// waitNoSleep waits until no "sleep <marker>" process is alive.
func waitNoSleep(t *testing.T, marker string) {
	t.Helper()
	waitSleeps(t, marker, "still alive", func(n int) bool { return n == 0 })
}
