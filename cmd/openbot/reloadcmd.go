package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"openbot/config"
)

// pidFileName is the file next to the store that holds the pid of the serve or
// chat using that store, for `openbot reload`.
const pidFileName = "openbot.pid"

func pidFilePath(storePath string) string {
	return filepath.Join(filepath.Dir(storePath), pidFileName)
}

// writePidFile records this process as the one using the store (the store's lock
// is already held, so no other openbot does): three lines, the pid, the absolute
// path of the config file it runs with (so `openbot reload --config B` refuses
// a B the server never reads), and the process start time from /proc (so a
// stale file whose pid was reused by another process is never signalled; empty
// where /proc is absent). The returned func removes the file if it still names
// this process.
func writePidFile(storePath, configPath string) (func(), error) {
	path := pidFilePath(storePath)
	me := strconv.Itoa(os.Getpid())
	abs, err := filepath.Abs(configPath)
	if err != nil {
		return func() {}, fmt.Errorf("pid file: config path: %w", err)
	}
	text := me + "\n" + abs + "\n" + procStart(os.Getpid()) + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return func() {}, fmt.Errorf("pid file: %w", err)
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.SplitN(string(b), "\n", 2)[0] == me {
			os.Remove(path)
		}
	}, nil
}

// procStart is the start time of process pid in clock ticks since boot (field
// 22 of /proc/PID/stat), or "" where /proc does not tell.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; fields after it follow ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 { // f[0] is field 3 (state), so field 22 is f[19]
		return ""
	}
	return f[19]
}

// runReload is `openbot reload --config FILE`: it checks the file as `config
// check` does and, when it is valid, has the openbot serving the store the file
// names (found through the pid file next to the store) re-read its own config
// file and apply it: through POST /admin/reload when admin.token is set, printing
// what changed and what needs a restart, else by SIGHUP (its log says). An
// invalid file is not sent, and neither is a FILE that is not the one the
// running openbot was started with (it would re-read its own file, not FILE):
// the message names that file and the exit code is 1.
func runReload(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("reload", stderr)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		fmt.Fprintln(stderr, "openbot: not reloaded; the running configuration is kept")
		return exitFail
	}
	pid, err := servingPid(cfg.Store.Path, *path)
	if err != nil {
		fmt.Fprintf(stderr, "openbot: %v\n", err)
		return exitFail
	}
	if cfg.Admin.Token != "" {
		report, applied, err := postReload(ctx, cfg)
		if err == nil {
			fmt.Fprint(stdout, report)
			if !applied {
				return exitFail
			}
			return exitOK
		}
		fmt.Fprintf(stderr, "openbot: %v; sending SIGHUP instead\n", err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "openbot: signal pid %d: %v\n", pid, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "openbot (pid %d) is reloading %s; its log says what changed (with admin.token set, reload prints it here)\n", pid, *path)
	return exitOK
}

// postReload asks the running server for the reload through POST /admin/reload
// with admin.token, after checking that it serves cfg's store, and returns its
// report: every change, each applied or needing a restart. applied is false
// when the server refused the file (the report lists why). err says the server
// could not be asked.
func postReload(ctx context.Context, cfg *config.Config) (report string, applied bool, err error) {
	r := &apiReader{base: "http://" + dialAddr(cfg.HTTP.Listen), token: cfg.Admin.Token, closer: func() {}}
	if err := r.servesStore(ctx, cfg.Store.Path); err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/admin/reload", nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("%s did not answer: %w", r.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return string(body), true, nil
	case http.StatusUnprocessableEntity:
		return string(body), false, nil
	}
	return "", false, fmt.Errorf("POST %s/admin/reload answered %d", r.base, resp.StatusCode)
}

// servingPid reads the pid file next to the store and checks that the process is
// alive, is the one that wrote the file (its /proc start time matches, so a
// reused pid never signals a stranger; where /proc is absent, its command line
// is not checked) and runs with configPath (compared as absolute paths).
func servingPid(storePath, configPath string) (int, error) {
	path := pidFilePath(storePath)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("no running openbot uses the store %s (no %s)", storePath, path)
	} else if err != nil {
		return 0, fmt.Errorf("pid file: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s does not hold a pid", path)
	}
	if len(lines) < 3 || lines[1] == "" {
		return 0, fmt.Errorf("pid file %s does not name the config file of pid %d (an older openbot wrote it); restart that openbot", path, pid)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("no running openbot uses the store %s (pid %d in %s: %v)", storePath, pid, path, err)
	}
	if want := lines[2]; want != "" && procStart(pid) != want {
		return 0, fmt.Errorf("pid %d in %s is not the openbot that wrote it; remove the stale file", pid, path)
	}
	abs, err := filepath.Abs(configPath)
	if err != nil {
		return 0, fmt.Errorf("config path: %w", err)
	}
	if abs != lines[1] {
		return 0, fmt.Errorf("the openbot (pid %d) using the store %s runs with %s, not %s: it would re-read its own file; edit that one, or restart it with --config %s", pid, storePath, lines[1], abs, configPath)
	}
	return pid, nil
}
