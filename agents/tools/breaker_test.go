package tools

// Attacks on the shell sandbox's guarantees (README "What the sandbox
// guarantees"), as a person in a group chat whose command a bot runs after
// approval. Every test here FAILS while the weakness it shows is open; each
// says what it proves and at what severity. Programs that need system calls
// sh cannot make are in testdata/breaker, built by the test and copied into
// the workspace (an attacker would write the same binary there with base64).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"openbot/agents"
)

var (
	breakerOnce sync.Once
	breakerBin  string
	breakerErr  error
)

// breaker builds testdata/breaker once per test binary and copies it into ws.
func breaker(t *testing.T, ws string) {
	t.Helper()
	breakerOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			breakerErr = err
			return
		}
		dir, err := os.MkdirTemp("", "openbot-breaker-")
		if err != nil {
			breakerErr = err
			return
		}
		os.Chmod(dir, 0o755)
		breakerBin = filepath.Join(dir, "breaker")
		cmd := exec.Command(goTool, "build", "-o", breakerBin, "./testdata/breaker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			breakerErr = fmt.Errorf("build testdata/breaker: %v\n%s", err, out)
		}
	})
	if breakerErr != nil {
		t.Skipf("no breaker program: %v", breakerErr)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, breakerBin, filepath.Join(ws, "breaker"))
}

// HIGH. The seccomp filter (helper.go) is built with go-seccomp-bpf, whose
// program jumps to the policy's DefaultAction, here ActionAllow, for any
// architecture other than the native one. A 64-bit process that enters the
// kernel through `int $0x80` (the i386 ABI, present on every x86-64 kernel
// with IA32 emulation) is checked as AUDIT_ARCH_I386, so none of the denied
// calls is denied: ptrace, keyctl/add_key, io_uring_*, userfaultfd, bpf,
// perf_event_open, mount, unshare... The README's "A seccomp filter refuses
// kernel modules, ptrace, mounts, new namespaces, BPF, perf, the keyring,
// io_uring and userfaultfd" does not hold against anyone who can run a binary.
//
// Fix: reject foreign architectures before the syscall checks: load a second,
// hand-written filter first (arch != AUDIT_ARCH_X86_64 -> SECCOMP_RET_KILL_PROCESS
// or ERRNO(ENOSYS)), or use a library that adds the arch check with a deny
// default (libseccomp: seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)); or deny the
// i386 entry altogether (the 32-bit syscall table has its own numbers: a denylist
// would have to list them again). Also worth considering: a default-deny allowlist.
func TestBreakSeccompI386ABI(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	breaker(t, filepath.Join(root, "thread-7"))
	sh := shellOf(t, Options{WorkspaceRoot: root})
	got, err := sh("grep Seccomp: /proc/self/status; ./breaker i386")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", got)
	if !strings.Contains(got, "Seccomp:\t2") || !strings.Contains(got, "native keyctl: -1 operation not permitted") {
		t.Fatalf("the filter is not on, so this proves nothing:\n%s", got)
	}
	// Fixed: the first call through a foreign entry point kills the process.
	if strings.Contains(got, "killed by SIGSYS") && lineWith(got, "i386 ") == "" {
		return
	}
	for _, name := range []string{"keyctl", "userfaultfd", "io_uring_setup", "ptrace"} {
		line := lineWith(got, "i386 "+name+": ")
		n, _ := strconv.Atoi(strings.TrimPrefix(line, "i386 "+name+": "))
		if n >= 0 {
			t.Errorf("%s is denied natively but the i386 entry point ran it (returned %d)", name, n)
		}
	}
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// HIGH. The workspace quota is measured by dirSize, a filepath.WalkDir by
// full path from openbot. A directory chain whose path is longer than
// PATH_MAX (4096) cannot be lstat'ed or read by full path (ENAMETOOLONG), and
// WalkDir skips what errs: every file below it counts 0. The command reaches
// it by relative chdir, one level at a time. Files there are limited only by
// RLIMIT_FSIZE each, so the quota (and, repeated, the host's disk) is unbounded,
// and the watcher never fires. The data stays after the command.
//
// Fix: measure without full paths (openat/fstatat from directory fds, or
// os.Root, which walks by fd), count allocated blocks (st_blocks) of every
// inode including directories and symlinks, and treat any entry it cannot
// measure as over the quota (stop the command) instead of skipping it. A
// filesystem quota (ext4/xfs project quota, or a size-limited filesystem per
// workspace) is the robust fix: a userland walk is always racy.
func TestBreakQuotaDeepPath(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	ws := filepath.Join(root, "thread-7")
	breaker(t, ws)
	sh := shellOf(t, Options{WorkspaceRoot: root, ShellLimits: small}) // 16 MiB quota
	got, err := sh("./breaker deep 16 8")                              // 16 files of 8 MiB
	t.Logf("%s %v", got, err)
	// Fixed: the command is stopped, within what it writes between two
	// measures (every 100 ms).
	stopped := err != nil && strings.Contains(err.Error(), "limit reached")
	if used := diskUsage(t, ws); !stopped || used > small.WorkspaceBytes+overshoot {
		t.Errorf("the workspace holds %d MiB on disk after the command, quota %d MiB (dirSize sees %d bytes); the command was stopped: %v",
			used>>20, small.WorkspaceBytes>>20, dirSize(ws), stopped)
	}
}

// diskUsage is what du says the directory holds on disk, in bytes.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("du: %v", err)
	}
	n, _ := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	return n
}

// HIGH. fallocate(FALLOC_FL_KEEP_SIZE) reserves disk blocks without changing
// a file's size: RLIMIT_FSIZE does not apply (the size does not grow) and
// dirSize counts apparent sizes, so it sees 0 bytes. One command reserves as
// much of the host's disk as it likes (`fallocate -n -l 200G x` with
// util-linux, which the sandbox shows), and it stays after the command.
//
// Fix: count st_blocks*512 (not Size) in the quota; better a filesystem quota.
// A seccomp rule that refuses fallocate with FALLOC_FL_KEEP_SIZE (mode & 1)
// closes this one call, not the class.
func TestBreakQuotaFallocateKeepSize(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	ws := filepath.Join(root, "thread-7")
	breaker(t, ws)
	sh := shellOf(t, Options{WorkspaceRoot: root, ShellLimits: small}) // 16 MiB quota
	got, err := sh("./breaker fallocate reserved 256; sleep 0.5")
	t.Logf("%s %v", got, err)
	if used := diskUsage(t, ws); used > small.WorkspaceBytes+(8<<20) {
		t.Errorf("the workspace holds %d MiB on disk after the command, quota %d MiB (dirSize sees %d bytes)",
			used>>20, small.WorkspaceBytes>>20, dirSize(ws))
	}
}

// HIGH when openbot runs as an unprivileged user, which the README asks for.
// The sandbox's files belong to openbot's own uid; a directory the command
// makes write-only (chmod 0300) can still be filled by names the command
// knows, but openbot cannot list it: WalkDir skips it and the quota watcher
// counts 0. (As root, CAP_DAC_READ_SEARCH hides this; the deep-path attack
// above works for root too.) Openbot also cannot clean the workspace up.
//
// Fix: as for the deep path: an entry the measurement cannot read stops the
// command (or openbot chmods it back before measuring); filesystem quotas.
func TestBreakQuotaUnreadableDir(t *testing.T) {
	if os.Getenv("OPENBOT_INNER") == "breaker-unreadable" {
		unreadableDir(t)
		return
	}
	requireBwrap(t)
	if os.Geteuid() != 0 {
		unreadableDir(t)
		return
	}
	dir, err := os.MkdirTemp("", "openbot-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	breaker(t, filepath.Join(dir, "unused")) // built before dropping root
	exe, _ := os.Executable()
	bin := filepath.Join(dir, "tools.test")
	copyFile(t, exe, bin)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	os.Chown(work, 65534, 65534)
	cmd := exec.Command(bin, "-test.run=^TestBreakQuotaUnreadableDir$", "-test.v")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "OPENBOT_INNER=breaker-unreadable", "HOME="+work, "TMPDIR="+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("inner (as nobody):\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBreakQuotaUnreadableDir") {
		t.Fatalf("inner test as nobody failed: %v", err)
	}
}

func unreadableDir(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "thread-7")
	t.Cleanup(func() {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error { os.Chmod(p, 0o755); return nil })
	})
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "hid"), 0o755) })
	sh := shellOf(t, Options{WorkspaceRoot: root, ShellLimits: small})
	got, err := sh("mkdir hid && chmod 0300 hid && for i in 1 2 3 4 5 6; do head -c 15M /dev/zero > hid/f$i; done; sleep 1; echo not-stopped")
	t.Logf("%s %v", got, err)
	os.Chmod(filepath.Join(ws, "hid"), 0o755)
	if size := dirSize(ws); size > small.WorkspaceBytes+(8<<20) && err == nil {
		t.Errorf("the command wrote %d MiB under a 16 MiB quota into a directory openbot cannot read, and was not stopped", size>>20)
	}
}

// MEDIUM. The quota watcher waits ten times as long as one measurement took.
// A workspace with a few hundred thousand empty files (which count 0 bytes,
// and fill the host's inodes: no limit on them either) takes long to walk, so
// the next check is many seconds away, and a command writes far past the quota
// in between; its result then says nothing of it. (Slow: -short skips it.)
//
// Fix: a bound on the interval (and on entries/inodes in the quota); a
// filesystem quota does not depend on polling.
func TestBreakQuotaWatcherSlowed(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	requireBwrap(t)
	root := t.TempDir()
	ws := filepath.Join(root, "thread-7")
	lim := small
	lim.CPUSeconds = 60
	lim.Timeout, lim.MaxTimeout = 2*time.Minute, 2*time.Minute
	sh := shellOf(t, Options{WorkspaceRoot: root, ShellLimits: lim})
	// Fixed: empty files count 4 KiB each, so the flood itself passes the
	// quota and is stopped.
	if _, err := sh(`for d in $(seq 100); do mkdir d$d && (cd d$d && seq 3000 | xargs touch); done`); err == nil || !strings.Contains(err.Error(), "quota") {
		t.Fatalf("300,000 empty files under a 16 MiB quota: %v", err)
	}
	got, err := sh("sleep 0.5; for i in $(seq 40); do head -c 15M /dev/zero > f$i; done; sleep 2; echo not-stopped")
	t.Logf("%s %v", got, err)
	if size := dirSize(ws); size > lim.WorkspaceBytes+overshoot && err == nil {
		t.Errorf("the command wrote %d MiB under a %d MiB quota and was not stopped", size>>20, lim.WorkspaceBytes>>20)
	}
}

// MEDIUM. "data memory per process (2048 MiB)" is RLIMIT_DATA, which does not
// count shared mappings: mmap(MAP_SHARED|MAP_ANONYMOUS) (also memfd_create and
// SysV shmget, whose size limits in the sandbox's fresh IPC namespace are the
// kernel's huge defaults) gives one process as much memory as the host has.
// The stack is not bounded either (RLIMIT_STACK hard is unlimited, so a
// process raises its own). One approved command can drive the host into the
// OOM killer, which may well pick openbot.
//
// Fix: a cgroup (memory.max, pids.max) per command or per openbot (systemd
// scope/slice, or bwrap inside a delegated cgroup); short of that, RLIMIT_AS as
// well as RLIMIT_DATA, a hard RLIMIT_STACK, and kernel.shmmax/shmall set in the
// sandbox's IPC namespace. The README should not call RLIMIT_DATA a memory limit.
func TestBreakSharedMemoryPastDataLimit(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	breaker(t, filepath.Join(root, "thread-7"))
	lim := small // 256 MiB per process
	lim.CPUSeconds = 30
	sh := shellOf(t, Options{WorkspaceRoot: root, ShellLimits: lim})
	// Fixed: the address space is capped at twice the data limit plus 1 GiB
	// (1.5 GiB here), which shared mappings count against.
	got, err := sh("./breaker shm 2048")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "touched 2048 MiB") {
		t.Errorf("one process holds 2 GiB under a 256 MiB memory limit:\n%s", lineWith(got, "RssShmem"))
	}
}

// MEDIUM. A command can leave a FIFO in the workspace. workspace_read,
// workspace_search (any search of the whole workspace), workspace_write and
// send_file open the path with a plain open(2) before they check what it is,
// and opening a FIFO blocks until a writer/reader comes: the tool call, the
// bot's run and the thread hang for good (no context reaches the open), and
// the goroutine and root fd leak. core.OpenSaved already does it right
// (Lstat first, O_NONBLOCK, then fstat and SameFile).
//
// Fix: open through the same helper: Lstat, refuse non-regular files, open
// with O_NONBLOCK (and O_NOFOLLOW for the last element), fstat, SameFile.
func TestBreakFIFOHangsFileTools(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	o := Options{WorkspaceRoot: root}
	tl := builtins(t, o)
	if got, err := call(t, tl["shell"], nil, map[string]any{"command": "mkfifo notes.txt report.md && echo planted"}); err != nil || !strings.Contains(got, "planted") {
		t.Fatalf("plant: %q %v", got, err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"workspace_read", map[string]any{"path": "notes.txt"}},
		{"workspace_write", map[string]any{"path": "notes.txt", "content": "x"}},
		{"send_file", map[string]any{"path": "report.md"}},
	} {
		done := make(chan string, 1)
		go func() {
			raw, _ := json.Marshal(c.args)
			out, err := tl[c.tool].Call(context.Background(), agents.ToolCall{Args: raw, Env: &fileEnv{},
				Bot: botProfile("engineer"), Thread: 7, Run: 1})
			done <- fmt.Sprintf("%q, %v", out, err)
		}()
		select {
		case r := <-done:
			t.Logf("%s: %s", c.tool, r)
		case <-time.After(3 * time.Second):
			t.Errorf("%s on a FIFO the sandbox planted hangs (still blocked after 3 s)", c.tool)
			// Unblock it: open the other end.
			p := filepath.Join(root, "thread-7", "notes.txt")
			if c.tool == "send_file" {
				p = filepath.Join(root, "thread-7", "report.md")
			}
			flag := os.O_WRONLY
			if c.tool == "workspace_write" {
				flag = os.O_RDONLY
			}
			if f, err := os.OpenFile(p, flag|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			} else if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
				f.Close()
			}
			<-done
		}
	}
}

// LOW (sandbox: none, which is unconfined by design, but the README's
// "Lifetime" promise is made for both modes). The command runs as openbot's
// user next to its supervisor, so it can SIGKILL the supervisor (its parent):
// nothing then kills what is below it, and a process in a session of its own
// (setsid) is outside the process group openbot kills. It outlives the
// command and openbot.
//
// Fix: in none mode put the command in a cgroup (kill via cgroup.kill), or at
// least run the supervisor under another uid / make the command unable to
// signal it; document that `sandbox: none` cannot promise the lifetime.
func TestBreakNoneModeSurvivor(t *testing.T) {
	marker := sleepMarker()
	t.Cleanup(func() {
		for _, pid := range sleepPids(marker) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sh := shellOf(t, Options{WorkspaceRoot: t.TempDir(), Sandbox: SandboxNone})
	got, err := sh("setsid sleep " + marker + " </dev/null >/dev/null 2>&1 & sleep 0.2; kill -9 $PPID; echo done")
	t.Logf("%q %v", got, err)
	waitSleeps(t, marker, "a process of the command outlived it", func(n int) bool { return n == 0 })
}

// MEDIUM (bots with shell_network). The egress proxy's unix socket is bound
// into the sandbox at /run/openbot/egress.sock, so a command connects to it
// directly, around the helper's 64-connection forwarder. openbot's HTTP server
// there has no cap on connections and no idle timeout: every connection costs
// openbot a file descriptor and a goroutine for as long as the command runs
// (up to MaxTimeout). 256 processes with 20000 descriptors each exhaust
// openbot's own descriptors (EMFILE for the platforms, the store, the model)
// or its memory: one command takes down every bot.
//
// Fix: do not bind the socket itself: the helper can receive a connected fd
// or a listening fd passed by bwrap (--sync-fd/--bind-fd style: open the
// socket before bwrap and pass the fd), or bind it into a directory only the
// helper can reach (e.g. pass the fd to the supervisor and never mount it);
// and wrap the listener in a connection limit (netutil.LimitListener) with
// IdleTimeout set.
func TestBreakEgressSocketFlood(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	breaker(t, filepath.Join(root, "thread-7"))
	tl := builtins(t, Options{WorkspaceRoot: root, ShellNetwork: map[string]bool{"engineer": true}})
	base := openFDs()
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if n := int64(openFDs()); n > peak.Load() {
					peak.Store(n)
				}
			}
		}
	}()
	got, err := call(t, tl["shell"], nil, map[string]any{"command": "./breaker unixflood " + egressSocket + " 3000"})
	close(stop)
	t.Logf("%q %v; openbot's fds: %d before, %d at the peak", got, err, base, peak.Load())
	if int(peak.Load())-base > 1000 {
		t.Errorf("one command made openbot hold %d more file descriptors through the egress socket", int(peak.Load())-base)
	}
}

func openFDs() int {
	e, _ := os.ReadDir("/proc/self/fd")
	return len(e)
}

// CRITICAL when openbot runs as root (as CI does; the README only says the
// process limit then does not hold). bwrap started by root maps the sandbox's
// uid 0 to the host's uid 0. The sandbox has no capabilities, but writes to
// /proc/sys are checked against the euid (kuid 0 = GLOBAL_ROOT_UID passes the
// owner bits), and bwrap does not cover /proc/sys read-only here (its
// access(W_OK) test fails with EACCES on the 0555 directory, which bwrap takes
// for "already read-only"). So the command writes host-global sysctls:
// kernel.core_pattern, vm.overcommit_memory, kernel.randomize_va_space,
// kernel.panic_on_oops, vm.drop_caches, ... (checked by hand by writing back
// the current values of core_pattern, overcommit_memory and pid_max: each write
// succeeded). With core_pattern = "|<host path of the workspace>/x" (the host
// path is in /proc/self/mountinfo, a documented limit) the
// next crashing process on the host (the command can crash one itself: a pipe
// handler runs even with RLIMIT_CORE 0) runs x as root in the host's
// namespaces: a full host compromise from one approved command.
//
// This test only asks access(2) (test -w), which goes through the same
// permission check; it writes nothing.
//
// Fix: never run bwrap as host uid 0: when openbot is root, start bwrap with
// SysProcAttr.Credential set to an unprivileged uid/gid (configurable, e.g.
// nobody or a dedicated openbot-sandbox user) so the sandbox's ids map to it;
// and cover /proc/sys read-only explicitly (--ro-bind /proc/sys /proc/sys after
// --proc, or --remount-ro) as a second line. Refusing to run shell as root
// (or `doctor` failing on it) is the simple alternative.
func TestBreakSysctlWritableAsRoot(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only as root")
	}
	sh := shellOf(t, Options{WorkspaceRoot: t.TempDir()})
	got, err := sh("cat /proc/self/uid_map; for f in kernel/core_pattern vm/overcommit_memory kernel/randomize_va_space; do " +
		"test -w /proc/sys/$f && echo writable $f; done; exit 0")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "writable") {
		t.Errorf("the sandbox may write the host's sysctls:\n%s", got)
	}
}
