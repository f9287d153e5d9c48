package tools

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestShellDiesWithOpenbot kills a stand-in for openbot (the test binary
// running the shell tool) with SIGKILL while its command runs with a background
// child, in each sandbox mode: every process of the command must die with it,
// and KillOrphans clears the registry the dead process left.
func TestShellDiesWithOpenbot(t *testing.T) {
	if m := os.Getenv("OPENBOT_INNER"); strings.HasPrefix(m, "die:") {
		parts := strings.Split(strings.TrimPrefix(m, "die:"), ",") // sandbox, marker, state dir
		sandbox, marker, state := parts[0], parts[1], parts[2]
		sh := shellOf(t, Options{WorkspaceRoot: t.TempDir(), Sandbox: sandbox, StateDir: state})
		_, _ = sh("sleep " + marker + " & sleep " + marker + "; echo never")
		return
	}
	modes(t, func(t *testing.T, sandbox string) {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		marker, state := sleepMarker(), t.TempDir()
		cmd := exec.Command(exe, "-test.run=^TestShellDiesWithOpenbot$")
		cmd.Env = append(os.Environ(), "OPENBOT_INNER=die:"+sandbox+","+marker+","+state)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitSleeps(t, marker, "the command's two sleeps did not start", func(n int) bool { return n >= 2 })
		if entries, _ := os.ReadDir(state); len(entries) != 1 {
			t.Errorf("registry holds %d entries while the command runs, want 1", len(entries))
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		waitNoSleep(t, marker)
		// The command's own processes are gone; its bwrap or helper may still
		// be on its way out, which KillOrphans then finishes and waits for.
		if _, err := KillOrphans(context.Background(), state, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("KillOrphans after the command died with its parent: %v", err)
		}
		if entries, _ := os.ReadDir(state); len(entries) != 0 {
			t.Errorf("registry not emptied: %d entries", len(entries))
		}
	})
}

// TestKillOrphans registers a running process group as a command a previous
// openbot left behind: KillOrphans kills it and waits until it is gone, and
// leaves alone a registered pid now used by another process.
func TestKillOrphans(t *testing.T) {
	state := t.TempDir()
	marker := sleepMarker()
	cmd := exec.Command("sh", "-c", "sleep "+marker+" & sleep "+marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reaps sh once it is killed
	waitSleeps(t, marker, "the sleeps did not start", func(n int) bool { return n >= 2 })
	register(state, cmd.Process.Pid, slog.New(slog.DiscardHandler))
	// A stale record: pid 1 with another start time.
	if err := os.WriteFile(filepath.Join(state, "1"), []byte("12345 1 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A command of another openbot that still runs (pid 1 with its own start
	// time stands for it): left alone.
	other := exec.Command("sleep", marker)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	rec := startTime(other.Process.Pid) + " 1 " + startTime(1)
	if err := os.WriteFile(filepath.Join(state, strconv.Itoa(other.Process.Pid)), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := KillOrphans(context.Background(), state, slog.New(slog.DiscardHandler))
	if n != 1 || err != nil {
		t.Fatalf("KillOrphans = %d, %v; want 1 killed", n, err)
	}
	if !running(other.Process.Pid) {
		t.Error("KillOrphans killed a command of another openbot that still runs")
	}
	other.Process.Kill()
	other.Wait()
	waitNoSleep(t, marker)
	if entries, _ := os.ReadDir(state); len(entries) != 1 {
		t.Errorf("registry holds %d entries, want only the other openbot's", len(entries))
	}
}
