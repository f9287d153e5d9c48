package tools

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// register records a started command (pid, which leads its process group) in
// dir, and returns the function that removes the record once it has ended.
// An empty dir registers nothing; a failure to write is logged, not fatal.
func register(dir string, pid int, log *slog.Logger) func() {
	if dir == "" {
		return func() {}
	}
	// The record: the command's start time, and openbot's pid and start
	// time, so another openbot on the same directory leaves it alone.
	self := os.Getpid()
	rec := startTime(pid) + " " + strconv.Itoa(self) + " " + startTime(self)
	path := filepath.Join(dir, strconv.Itoa(pid))
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.WriteFile(path, []byte(rec), 0o600)
	}
	if err != nil {
		log.Warn("register shell command", "pid", pid, "err", err)
		return func() {}
	}
	return func() { os.Remove(path) }
}

// startTime is field 22 of /proc/pid/stat (the process's start time in clock
// ticks since boot), which tells a process from a later one with its pid; ""
// when pid is gone.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// KillOrphans ends the shell commands that an earlier openbot process, no
// longer running, registered in dir (Options.StateDir) and that still run, killing each one's
// process group (a sandbox's whole pid namespace goes with it), and waits until
// they are gone, at most 10 s. cmd calls it at start, before any run resumes,
// so a resumed run never races a command of the process before. It returns how
// many it killed; an error only when one was still alive at the end.
func KillOrphans(ctx context.Context, dir string, log *slog.Logger) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, nil // nothing registered
	}
	var alive []int
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		pid, err := strconv.Atoi(e.Name())
		b, _ := os.ReadFile(path)
		rec := strings.Fields(string(b)) // command's start time, openbot's pid and start time
		if len(rec) == 3 && rec[1] != strconv.Itoa(os.Getpid()) {
			if owner, _ := strconv.Atoi(rec[1]); owner > 0 && startTime(owner) == rec[2] {
				continue // another openbot, still running, owns it
			}
		}
		if err == nil && pid > 0 && len(rec) > 0 && startTime(pid) == rec[0] {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			alive = append(alive, pid)
			log.Warn("killed a shell command left running by the previous openbot process", "pid", pid)
		}
		os.Remove(path)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range alive {
		for running(pid) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return len(alive), fmt.Errorf("shell command (pid %d) of the previous openbot process is still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(alive), nil
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
