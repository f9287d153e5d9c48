package tools

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// HelperArg is the first argument that makes the openbot binary act as the
// shell's sandbox helper instead of itself (see init). The helper is
// openbot's own executable run again: inside bubblewrap it sets the limits and
// the seccomp filter and, with the network on, forwards the sandbox's proxy
// port to openbot's egress guard; with `sandbox: none` it also makes sure no
// process of the command outlives it.
const HelperArg = "__openbot_shell_helper"

// init makes every binary that links this package (openbot, and each test
// binary whose tests run the shell tool) act as the sandbox helper when it is
// started as one, before its main or TestMain runs. The helper is the
// executable itself run again; a binary that did not check this first would
// run its own main (or its whole test suite) inside the sandbox instead.
func init() {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		os.Exit(helperMain(os.Args[2:]))
	}
}

// helperMain dispatches "exec" and "supervise"; it returns the exit status.
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "openbot shell helper: want exec or supervise")
		return 125
	}
	var err error
	switch args[0] {
	case "exec":
		err = helperExec(args[1:])
	case "supervise":
		return helperSupervise(args[1:])
	default:
		err = fmt.Errorf("unknown mode %q", args[0])
	}
	fmt.Fprintln(os.Stderr, "openbot shell helper:", err)
	return 125
}

// deniedSyscalls fail with EPERM inside the sandbox: kernel modules and
// kexec, other processes' memory (ptrace, process_vm_*), new namespaces and
// mounts, BPF and perf, the kernel keyring, io_uring (a large, often
// vulnerable surface), userfaultfd, handles that bypass path checks, and the
// clock, swap, reboot and accounting controls.
var deniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "delete_module",
	"finit_module", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"kexec_file_load", "kexec_load", "keyctl", "mount", "move_mount", "open_by_handle_at",
	"open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "perf_event_open", "pivot_root",
	"process_vm_readv", "process_vm_writev", "ptrace", "quotactl", "reboot", "request_key",
	"setns", "settimeofday", "swapoff", "swapon", "syslog", "umount2", "unshare",
	"userfaultfd", "uselib", "name_to_handle_at", "lookup_dcookie", "iopl", "ioperm",
	"adjtimex", "vhangup",
}

// seccompPolicy is the deny list helperExec installs, as go-seccomp-bpf
// assembles it.
func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: deniedSyscalls}},
	}
}

// Seccomp return values and architectures (linux/seccomp.h, linux/audit.h).
const (
	retKillProcess  = 0x80000000
	retErrno        = 0x00050000
	retAllow        = 0x7fff0000
	auditArchX86_64 = 0xc000003e
	auditArchARM64  = 0xc00000b7
	x32SyscallBit   = 0x40000000
)

// seccompProgram is the whole filter: first a guard that kills a process
// entering the kernel through another architecture's calls (the i386 entry
// of an x86-64 kernel, or x32, where the deny list's numbers mean other calls),
// and makes fallocate fail with EOPNOTSUPP (its keep-size mode reserves disk
// past the file size limit; programs fall back to writing), then the deny list.
func seccompProgram() ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = auditArchX86_64
	case "arm64":
		arch = auditArchARM64
	default:
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	p := seccompPolicy()
	rest, err := p.Assemble()
	if err != nil {
		return nil, err
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: retKillProcess},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
		bpf.RetConstant{Val: retKillProcess},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_FALLOCATE), SkipFalse: 1},
		bpf.RetConstant{Val: retErrno | uint32(unix.EOPNOTSUPP)},
	}
	raw, err := bpf.Assemble(append(guard, rest...))
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// loadSeccomp sets no_new_privs and installs the filter fp (seccompProgram's)
// on every thread. It allocates nothing and, like every call helperExec makes
// once its limits are set, is a raw system call: one the scheduler sees
// blocking may start another thread, which needs memory.
func loadSeccomp(fp *unix.SockFprog) error {
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(fp))); e != 0 {
		return e
	}
	return nil
}

// execNofile is the soft open-file limit the command starts with: the Linux
// default, which programs that use select(2) need. The Go runtime raised the
// helper's own soft limit to the hard one at start.
const execNofile = 1024

// helperExec sets the rlimits, a lower CPU priority, no_new_privs and the
// seccomp filter on itself, then replaces itself with the command after "--".
//
// Everything it needs after the first limit is built before it: the limits
// count the helper's own mappings too (a race-enabled test binary already
// maps more than a small data limit, and any Go binary reserves more address
// space than a small memory_bytes allows), so from then on the helper must not
// ask the kernel for memory. That is also why it calls execve itself instead
// of syscall.Exec, which allocates.
func helperExec(args []string) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	nproc := fs.Uint64("nproc", 0, "")
	data := fs.Uint64("data", 0, "")
	cpu := fs.Uint64("cpu", 0, "")
	fsize := fs.Int64("fsize", -1, "")
	noSeccomp := fs.Bool("no-seccomp", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return errors.New("exec: no command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	pathp, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return err
	}
	var filter *unix.SockFprog
	if !*noSeccomp {
		prog, err := seccompProgram()
		if err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
		filter = &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	}
	type limit struct {
		what int
		r    unix.Rlimit
	}
	limits := []limit{{unix.RLIMIT_CORE, unix.Rlimit{}}}
	if *nproc > 0 {
		limits = append(limits, limit{unix.RLIMIT_NPROC, unix.Rlimit{Cur: *nproc, Max: *nproc}})
	}
	if *data > 0 {
		// The address space bounds what DATA does not count (shared and
		// stack mappings), with room for runtimes that reserve more than
		// they use.
		as := 2**data + 1<<30
		limits = append(limits, limit{unix.RLIMIT_DATA, unix.Rlimit{Cur: *data, Max: *data}},
			limit{unix.RLIMIT_AS, unix.Rlimit{Cur: as, Max: as}})
	}
	if *cpu > 0 {
		limits = append(limits, limit{unix.RLIMIT_CPU, unix.Rlimit{Cur: *cpu, Max: *cpu + 1}})
	}
	if *fsize >= 0 {
		limits = append(limits, limit{unix.RLIMIT_FSIZE, unix.Rlimit{Cur: uint64(*fsize), Max: uint64(*fsize)}})
	}
	var nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		return err
	}
	nofile.Cur = min(nofile.Cur, execNofile)
	limits = append(limits, limit{unix.RLIMIT_NOFILE, nofile})

	// No collection may start or be running from here on, and no other
	// thread be started: both need memory. SetGCPercent(-1) waits for a
	// running collection to finish; with one P and only raw system calls
	// below, the scheduler has no reason to start a thread.
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(1)
	// From here on nothing allocates: on failure the helper names the limit
	// by number and exits.
	for i := range limits {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(limits[i].what),
			uintptr(unsafe.Pointer(&limits[i].r)), 0, 0, 0); e != 0 {
			return fmt.Errorf("set limit %d: %w", limits[i].what, e)
		}
	}
	// A command busy at the CPU leaves the host's other work (openbot, other
	// bots) first in line.
	unix.RawSyscall(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, 10)
	if filter != nil {
		if err := loadSeccomp(filter); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return e
}

// helperSupervise runs the command after "--" as its child and returns its
// exit status (128+signal when a signal ended it). It is a child subreaper:
// when the command ends, or the helper is told to stop (SIGTERM, SIGINT,
// SIGHUP: openbot sets SIGTERM as its parent-death signal), it kills every
// process left below it before it returns. With -listen and -upstream it also
// accepts TCP connections on -listen (the sandbox's proxy port) and forwards
// each to the unix socket -upstream (openbot's egress guard).
func helperSupervise(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	listen := fs.String("listen", "", "")
	upstream := fs.String("upstream", "", "")
	if err := fs.Parse(args); err != nil || len(fs.Args()) == 0 {
		fmt.Fprintln(os.Stderr, "openbot shell helper: supervise: want -- command")
		return 125
	}
	argv := fs.Args()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "openbot shell helper: subreaper:", err)
		return 125
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fwd sync.WaitGroup
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "openbot shell helper: proxy port:", err)
			return 125
		}
		fwd.Add(1)
		go func() { defer fwd.Done(); forward(ctx, ln, *upstream) }()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "openbot shell helper:", err)
		return 125
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-stop:
		_ = cmd.Process.Kill()
		<-done
	}
	killDescendants()
	cancel()
	fwd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// killDescendants kills and reaps the helper's children until none is left;
// as a subreaper it inherits every orphan below it, so this reaches them all.
func killDescendants() {
	self := os.Getpid()
	if l, _ := os.Readlink("/proc/self"); l != strconv.Itoa(self) {
		// /proc is another pid namespace's: the helper is the init of its
		// own (`sandbox: none`), whose processes all die when it exits.
		return
	}
	for {
		kids := children(self)
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for range kids {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(-1, &ws, 0, nil); errors.Is(err, syscall.ECHILD) {
				break
			}
		}
	}
}

// children lists the pids whose parent is ppid, from /proc.
func children(ppid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// maxForwards bounds the proxy connections one command has open at once.
const maxForwards = 64

// forward accepts connections on ln until ctx is done and joins each to a new
// connection to the unix socket upstream; at most maxForwards at a time.
func forward(ctx context.Context, ln net.Listener, upstream string) {
	go func() { <-ctx.Done(); ln.Close() }()
	slots := make(chan struct{}, maxForwards)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer c.Close()
			u, err := net.Dial("unix", upstream)
			if err != nil {
				return
			}
			defer u.Close()
			stop := context.AfterFunc(ctx, func() { c.Close(); u.Close() })
			defer stop()
			join(c, u)
		}()
	}
}

// join copies both ways between a and b until either side ends, then closes
// both write halves.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
