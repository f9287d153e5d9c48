package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"openbot/config"
)

// pidFileName is the file next to the store that holds the pid of the serve or
// chat using that store, for `openbot reload`.
const pidFileName = "openbot.pid"

func pidFilePath(storePath string) string {
	return filepath.Join(filepath.Dir(storePath), pidFileName)
}

// writePidFile records this process as the one using the store (the store's lock
// is already held, so no other openbot does). The returned func removes the file
// if it still names this process.
func writePidFile(storePath string) (func(), error) {
	path := pidFilePath(storePath)
	me := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(path, []byte(me+"\n"), 0o600); err != nil {
		return func() {}, fmt.Errorf("pid file: %w", err)
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == me {
			os.Remove(path)
		}
	}, nil
}

// runReload is `openbot reload --config FILE`: it checks the file as `config
// check` does and, when it is valid, sends SIGHUP to the openbot serving the
// store the file names (found through the pid file next to the store), which
// re-reads the file and applies it (its log says what changed). An invalid file
// is not sent: every problem is printed and the exit code is 1.
func runReload(_ context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "config.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		fmt.Fprintln(stderr, "openbot: not reloaded; the running configuration is kept")
		return exitFail
	}
	pid, err := servingPid(cfg.Store.Path)
	if err != nil {
		fmt.Fprintf(stderr, "openbot: %v\n", err)
		return exitFail
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "openbot: signal pid %d: %v\n", pid, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "openbot (pid %d) is reloading %s; its log says what changed\n", pid, *path)
	return exitOK
}

// servingPid reads the pid file next to the store and checks that the process is
// alive and, where /proc tells, an openbot (so a stale file never signals a
// stranger).
func servingPid(storePath string) (int, error) {
	path := pidFilePath(storePath)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("no running openbot uses the store %s (no %s)", storePath, path)
	} else if err != nil {
		return 0, fmt.Errorf("pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s does not hold a pid", path)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("no running openbot uses the store %s (pid %d in %s: %v)", storePath, pid, path, err)
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmd), "openbot") {
		return 0, fmt.Errorf("pid %d in %s is not openbot; remove the stale file", pid, path)
	}
	return pid, nil
}
