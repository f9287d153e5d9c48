package tools

import (
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// small are limits small enough to reach quickly in a test.
var small = ShellLimits{Processes: 48, MemoryBytes: 256 << 20, CPUSeconds: 1, TmpBytes: 8 << 20,
	WorkspaceBytes: 16 << 20, Timeout: 30 * time.Second}

// overshoot is how far past its quota a workspace may be when the watcher
// stops a command: what a fast writer puts on disk between two measures and the
// kill, on a loaded machine under the race detector. It only rules out an
// unbounded fill; that the command was stopped is the check.
const overshoot = 512 << 20

// stillResponsive runs a plain command after a limit test: the tool, the
// sandbox and the host must still serve the next command at once.
func stillResponsive(t *testing.T, sh func(string) (string, error)) {
	t.Helper()
	got, err := sh("echo still-here")
	if err != nil || !strings.Contains(got, "exit status: 0") || !strings.Contains(got, "still-here") {
		t.Fatalf("the next command after hitting a limit: %q, %v", got, err)
	}
}

func shellOf(t *testing.T, o Options) func(string) (string, error) {
	tl := builtins(t, o)
	return func(cmd string) (string, error) {
		return call(t, tl["shell"], nil, map[string]any{"command": cmd})
	}
}

func TestShellLimits(t *testing.T) {
	modes(t, func(t *testing.T, sandbox string) {
		root := t.TempDir()
		sh := shellOf(t, Options{WorkspaceRoot: root, Sandbox: sandbox, ShellLimits: small})
		cases := []struct {
			name, cmd, want string
			bwrapOnly       bool
		}{
			// 3 GiB through a program that keeps all its input in memory.
			{name: "memory", cmd: "head -c 3G /dev/zero | tail -n 1 >/dev/null", want: "memory limit (256 MiB per process)"},
			{name: "cpu", cmd: "while :; do :; done", want: "CPU time limit (1 s per process)"},
			{name: "tmp", cmd: "head -c 1G /dev/zero > /tmp/fill", want: "no space left: /tmp and /dev/shm hold 8 MiB each", bwrapOnly: true},
			{name: "shm", cmd: "head -c 1G /dev/zero > /dev/shm/fill", want: "no space left: /tmp and /dev/shm hold 8 MiB each", bwrapOnly: true},
			// One file: the file size limit stops it at what the quota leaves.
			{name: "workspace file", cmd: "head -c 1G /dev/zero > big", want: "file size limit: the workspace quota (16 MiB) leaves no more room"},
		}
		for _, c := range cases {
			if c.bwrapOnly && sandbox == SandboxNone {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				got, err := sh(c.cmd)
				if err != nil {
					t.Fatalf("%v", err)
				}
				if !strings.Contains(got, "limit reached: "+c.want) {
					t.Errorf("result does not name the limit %q:\n%s", c.want, got)
				}
				if size := dirSize(filepath.Join(root, "thread-7")); size > small.WorkspaceBytes {
					t.Errorf("workspace holds %d bytes, over its quota", size)
				}
				os.RemoveAll(filepath.Join(root, "thread-7", "big"))
				stillResponsive(t, sh)
			})
		}
		// Many files, each under the file size limit: the watcher stops it.
		t.Run("workspace files", func(t *testing.T) {
			got, err := sh("i=0; while :; do head -c 1M /dev/zero > f$i; i=$((i+1)); done")
			if err == nil || !strings.Contains(err.Error(), "limit reached: the workspace quota (16 MiB) was passed; the command was stopped") {
				t.Fatalf("err = %v; want the quota named (result: %q)", err, got)
			}
			// It stops within one check of the quota.
			if size := dirSize(filepath.Join(root, "thread-7")); size > small.WorkspaceBytes+overshoot {
				t.Errorf("workspace holds %d bytes", size)
			}
			// Over the quota, a command still runs and may delete.
			stillResponsive(t, sh)
			if got, err := sh("rm f*; echo removed"); err != nil || !strings.Contains(got, "removed") {
				t.Fatalf("rm over the quota: %q, %v", got, err)
			}
		})
	})
}

func TestShellTimeoutCeiling(t *testing.T) {
	o := Options{WorkspaceRoot: t.TempDir(), ShellLimits: ShellLimits{Timeout: time.Minute, MaxTimeout: 2 * time.Minute}}.withDefaults()
	lim := o.limitsFor("engineer")
	for _, c := range []struct {
		asked int64
		want  time.Duration
	}{{0, time.Minute}, {30, 30 * time.Second}, {600, 2 * time.Minute}, {1 << 40, 2 * time.Minute}} {
		if got := lim.timeoutFor(c.asked); got != c.want {
			t.Errorf("timeout_seconds %d: %s, want %s", c.asked, got, c.want)
		}
	}
	if d := defaultShellLimits.MaxTimeout; d != 5*time.Minute {
		t.Errorf("default ceiling %s; the README says 5 minutes", d)
	}
}

// TestShellProcessLimit starts a storm of processes as an unprivileged user
// (the kernel does not apply the process limit to root, which runs CI): the
// test binary runs itself as nobody for the inner test.
func TestShellProcessLimit(t *testing.T) {
	if os.Getenv("OPENBOT_INNER") == "process-limit" {
		processStorm(t)
		return
	}
	requireBwrap(t)
	if os.Geteuid() != 0 {
		processStorm(t)
		return
	}
	dir, err := os.MkdirTemp("", "openbot-nobody-") // t.TempDir's parent is private to root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tools.test")
	copyFile(t, exe, bin)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestShellProcessLimit$", "-test.v")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "OPENBOT_INNER=process-limit", "HOME="+work, "TMPDIR="+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("inner:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestShellProcessLimit") {
		t.Fatalf("inner test as nobody: %v\n%s", err, out)
	}
}

// processStorm runs under bwrap only: with `sandbox: none` there is no user
// namespace, so the limit counts every process of the user.
func processStorm(t *testing.T) {
	{
		sh := shellOf(t, Options{WorkspaceRoot: t.TempDir(), ShellLimits: small})
		got, err := sh("for i in $(seq 500); do sleep 30 & done 2>&1; echo done")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("storm: %.300s", got)
		if !strings.Contains(got, "limit reached: process limit (48 processes)") {
			t.Errorf("result does not name the process limit:\n%s", got)
		}
		stillResponsive(t, sh)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// dirSize is the workspace's usage as the quota counts it.
func dirSize(dir string) int64 {
	n, _ := usage(dir, math.MaxInt64)
	return n
}

// TestHelperExecsUnderLimitsBelowItsOwnSize: the helper sets limits smaller
// than the Go process it is already (address space over 1 GiB, and under
// -race a data segment over 256 MiB), so it must reach execve without asking
// the kernel for memory; the command then starts afresh under them. The
// command reports the limits it got, the soft open-file limit included.
func TestHelperExecsUnderLimitsBelowItsOwnSize(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	wantNofile := strconv.FormatUint(min(nofile.Max, 1024), 10)
	for i := range 20 { // the old helper failed only when an allocation needed a new mapping
		cmd := exec.Command(self, HelperArg, "exec", "-data", strconv.Itoa(8<<20), "-no-seccomp",
			"--", "/bin/sh", "-c", "ulimit -d; ulimit -n")
		// Collections all through the helper's start, so that one is likely
		// running when the limits are set.
		cmd.Env = append(os.Environ(), "GOGC=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if got := strings.Fields(string(out)); len(got) != 2 || got[0] != "8192" || got[1] != wantNofile {
			t.Fatalf("run %d: the command saw data limit (KiB) and open files %q, want 8192 and %s", i, got, wantNofile)
		}
	}
}
