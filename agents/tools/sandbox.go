package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"openbot/agents"
)

// Sandbox modes of Options.Sandbox (DESIGN.md §9 "shell runs in a sandbox").
const (
	// SandboxBwrap runs every shell command under bubblewrap (bwrap): new user,
	// pid, ipc, uts, cgroup and (unless the bot's network is on) net namespaces,
	// no capabilities, an empty root with read-only system directories and the
	// thread's workspace read-write at SandboxWorkdir. The default.
	SandboxBwrap = "bwrap"
	// SandboxNone runs shell commands directly on the host with openbot's file
	// system and network (only the environment is still minimal). An explicit
	// opt-out that cmd logs at WARN on start.
	SandboxNone = "none"
)

// SandboxWorkdir is where the thread's workspace appears inside the sandbox; it
// is the command's working directory and HOME.
const SandboxWorkdir = "/workspace"

// DefaultBwrapPath is Options.BwrapPath when empty: looked up in PATH.
const DefaultBwrapPath = "bwrap"

// probeTimeout bounds one sandbox probe (`bwrap ... /bin/sh -c true`).
const probeTimeout = 10 * time.Second

// ErrNoSandbox is returned (wrapped, with the fix in the message) by the shell
// tool and CheckSandbox when Options.Sandbox is SandboxBwrap and bubblewrap is
// missing or cannot create its namespaces on this machine. It matches
// agents.ErrNotRun: a call refused so had no effect, and an approved one is
// reported as not run (DESIGN.md §5).
var ErrNoSandbox = agents.NewNotRun("shell is disabled: no sandbox")

// fixHint names the ways out of ErrNoSandbox.
const fixHint = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), " +
	"or set `sandbox: none` in the config to run shell commands without a sandbox (not recommended: " +
	"they can then read openbot's config, store and environment)"

// sysDirs are the host directories shown read-only inside the sandbox so that
// programs run; a directory that is a symbolic link on the host (merged /usr)
// becomes the same link.
var sysDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the pieces of /etc shown read-only (when present): dynamic
// linker, alternatives, users and time zone. Nothing else of /etc is visible.
var etcFiles = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime",
}

// netEtcFiles are added when the bot's shell network is on: the CA
// certificates TLS clients need and the name files programs read. There is no
// resolv.conf: names are resolved by the egress proxy, outside.
var netEtcFiles = []string{
	"/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/services",
	"/etc/protocols", "/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf",
}

// sandbox builds the shell's bubblewrap command lines and remembers a
// successful probe, so the probe runs once per process when all is well and
// again on every call while it fails (the refusal then names the fix).
type sandbox struct {
	opts    Options
	ok      atomic.Bool
	noPidNS atomic.Bool // with SandboxNone: making a pid namespace failed here
}

func (s *sandbox) none() bool { return s.opts.Sandbox == SandboxNone }

// ready returns nil when shell commands may run: the sandbox is off by
// configuration, or a probe succeeded. Otherwise it probes and returns the
// probe's ErrNoSandbox.
func (s *sandbox) ready(ctx context.Context) error {
	if s.none() || s.ok.Load() {
		return nil
	}
	if err := probe(ctx, s.opts); err != nil {
		return err
	}
	s.ok.Store(true)
	return nil
}

// CheckSandbox reports whether the shell tool configured by opts can run
// commands on this machine: nil for SandboxNone, else it runs
// `bwrap <the shell's arguments> /bin/sh -c true` (at most 10 s) and returns an
// error wrapping ErrNoSandbox that says what failed and how to fix it. cmd calls
// it at start so a missing sandbox is reported before any bot needs the shell.
func CheckSandbox(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	if opts.Sandbox == SandboxNone {
		return nil
	}
	return probe(ctx, opts)
}

func probe(ctx context.Context, o Options) error {
	_, err := probeRun(ctx, o, "true")
	return err
}

// probeRun runs command in a fresh temporary workspace the way the shell runs a
// command of a bot without network, and returns its output; an error wrapping
// ErrNoSandbox when bubblewrap or the helper does not work here.
func probeRun(ctx context.Context, o Options, command string) (string, error) {
	path, err := exec.LookPath(o.BwrapPath)
	if err != nil && o.Sandbox != SandboxNone {
		return "", fmt.Errorf("%w: bubblewrap (%q) was not found: %s", ErrNoSandbox, o.BwrapPath, fixHint)
	}
	helper, err := helperPath(o)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	dir, err := os.MkdirTemp("", "openbot-sandbox-probe-")
	if err != nil {
		return "", fmt.Errorf("%w: probe directory: %v", ErrNoSandbox, err)
	}
	defer os.RemoveAll(dir)
	o.StateDir = ""
	sb := &sandbox{opts: o}
	out, err := sb.run(ctx, spec{workspace: dir, helper: helper, limits: o.ShellLimits,
		fsize: o.ShellLimits.WorkspaceBytes, command: command}, probeTimeout)
	if err == nil && !strings.HasPrefix(out, "exit status: 0 ") {
		err = errors.New(out)
	}
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return "", fmt.Errorf("%w: %s does not work here (%s): allow unprivileged user namespaces "+
			"(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or %s",
			ErrNoSandbox, path, msg, fixHint)
	}
	return out, nil
}

// sandboxEnv is the whole environment inside the sandbox (and of the bwrap
// process itself, whose /proc/1/environ the sandbox can read). With the network
// on, the proxy variables point every HTTP client at the egress port, and the
// sandbox's own loopback (not the host's) stays direct.
func sandboxEnv(o Options, network bool) []string {
	env := shellEnv(o, SandboxWorkdir)
	if network {
		p := "http://" + egressPort
		env = append(env, "http_proxy="+p, "https_proxy="+p, "HTTP_PROXY="+p, "HTTPS_PROXY="+p,
			"ALL_PROXY="+p, "all_proxy="+p, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
	}
	return env
}

// helperInSandbox is where openbot's executable appears inside the sandbox.
const helperInSandbox = "/run/openbot/helper"

// spec is one sandboxed command.
type spec struct {
	workspace  string // absolute host directory, bound read-write at SandboxWorkdir
	helper     string // host path of openbot's executable (the helper)
	egress     string // host path of the egress proxy's socket; "" is network off
	limits     ShellLimits
	used       int64 // bytes in the workspace when the command starts (usage)
	unmeasured error // why the workspace could not be measured whole at the start
	fsize      int64 // RLIMIT_FSIZE: what is left of the workspace quota
	env        []string
	command    string
}

// helperArgv is the helper's command line for running sh -c command with the
// limits of s; helper is the helper's path where it runs. Under bwrap the
// supervisor is needed only to forward the egress port; with `sandbox: none`
// (unsandboxed) it always runs, to keep the command's processes in check, and
// there is no seccomp filter (an explicit opt-out of confinement).
func helperArgv(helper string, s spec, unsandboxed bool) []string {
	argv := []string{helper, HelperArg, "exec",
		"-nproc", strconv.Itoa(s.limits.Processes),
		"-data", strconv.FormatInt(s.limits.MemoryBytes, 10),
		"-cpu", strconv.Itoa(s.limits.CPUSeconds),
		"-fsize", strconv.FormatInt(s.fsize, 10)}
	if unsandboxed {
		argv = append(argv, "-no-seccomp")
	}
	argv = append(argv, "--", "/bin/sh", "-c", s.command)
	switch {
	case s.egress != "":
		argv = append([]string{helper, HelperArg, "supervise", "-listen", egressPort, "-upstream", egressSocket, "--"}, argv...)
	case unsandboxed:
		argv = append([]string{helper, HelperArg, "supervise", "--"}, argv...)
	}
	return argv
}

// bwrapArgs returns bubblewrap's options (read by bwrap from a file
// descriptor, so the host paths in them never show in the sandbox's
// /proc/1/cmdline) to run helperArgv(helperInSandbox, s): new user (no nested ones), pid, ipc, uts, cgroup and net
// namespaces, no capabilities, an empty read-only root with the system
// directories read-only, the workspace read-write at SandboxWorkdir, /tmp and
// /dev/shm as tmpfs of TmpBytes each, and the helper, which sets the limits and
// the seccomp filter and then runs `sh -c command`. With s.egress the proxy's
// socket is bound in too; the namespace still has only its own loopback.
// Nothing of openbot's process, environment, config, store, logs, /home, /root
// or the rest of the host file system is mounted.
func bwrapArgs(o Options, s spec) []string {
	a := []string{"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--hostname", "sandbox", "--clearenv"}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	binds := map[string]string{s.workspace: SandboxWorkdir} // host source -> sandbox path
	for _, d := range sysDirs {
		st, err := os.Lstat(d)
		switch {
		case err != nil:
		case st.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case st.IsDir():
			a = append(a, "--ro-bind", d, d)
			binds[d] = d
		}
	}
	etc := etcFiles
	if s.egress != "" {
		etc = append(append([]string(nil), etcFiles...), netEtcFiles...)
	}
	for _, f := range etc {
		a = append(a, "--ro-bind-try", f, f)
	}
	tmp := strconv.FormatInt(s.limits.TmpBytes, 10)
	// The kernel's settings under /proc/sys are checked against the user id,
	// not capabilities: when openbot runs as root the sandbox's uid 0 is the
	// host's, so they are shown read-only (the host's values), as are the
	// other writable corners of /proc.
	a = append(a, "--proc", "/proc")
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--dev", "/dev", "--size", tmp, "--tmpfs", "/dev/shm",
		"--size", tmp, "--tmpfs", "/tmp", "--bind", s.workspace, SandboxWorkdir,
		"--ro-bind", s.helper, helperInSandbox)
	if s.egress != "" {
		a = append(a, "--bind", s.egress, egressSocket)
	}
	a = append(a, hideArgs(o.SandboxHide, binds)...)
	// The root is bwrap's own tmpfs; read-only, so only the workspace, /tmp and
	// /dev/shm (fresh tmpfs) can be written.
	return append(a, "--remount-ro", "/", "--chdir", SandboxWorkdir)
}

// hideArgs masks each of hide (files such as the config, store and log) that
// lies under a bound directory with an empty read-only file (/dev/null), so
// the sandbox cannot read it even where the operator put it inside /usr or the
// workspace. Directories are masked with an empty tmpfs.
func hideArgs(hide []string, binds map[string]string) []string {
	srcs := make([]string, 0, len(binds))
	for src := range binds {
		srcs = append(srcs, src)
	}
	sort.Strings(srcs)
	var a []string
	for _, h := range hide {
		abs, err := filepath.Abs(h)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		st, err := os.Stat(abs)
		if err != nil {
			continue // not there: nothing to show either
		}
		for _, src := range srcs {
			if abs == src || !within(src, abs) {
				continue
			}
			rel, _ := filepath.Rel(src, abs)
			dst := filepath.Join(binds[src], rel)
			if st.IsDir() {
				a = append(a, "--tmpfs", dst)
			} else {
				a = append(a, "--ro-bind", os.DevNull, dst)
			}
		}
	}
	return a
}

// reach describes what a shell command of a bot with the given network
// setting and limits can reach, for approval prompts. Until a probe has
// succeeded it probes the sandbox (at most probeTimeout), so a prompt never
// claims a sandbox that does not work: then it says the shell cannot run at all.
func (s *sandbox) reach(network bool, lim ShellLimits) string {
	limits := " Limits: " + lim.Describe(!s.none()) + "."
	if os.Geteuid() == 0 {
		limits += " The process limit does not hold: openbot runs as root."
	}
	if s.none() {
		return "runs WITHOUT a sandbox: sees everything openbot can (its files, environment and network)." + limits
	}
	if err := s.ready(context.Background()); err != nil {
		return "cannot run until the sandbox works (bubblewrap is missing or not usable here): approving it runs nothing"
	}
	if !network {
		return "runs in a sandbox: sees only this thread's workspace; no network." + limits
	}
	net := "network: HTTP and HTTPS to public internet hosts only, through openbot's egress proxy " +
		"(no loopback, private, link-local or cloud metadata addresses"
	if len(s.opts.FetchAllowHosts) > 0 {
		net += ", except the allowed hosts " + strings.Join(s.opts.FetchAllowHosts, ", ")
	}
	return "runs in a sandbox: sees only this thread's workspace; " + net + ")." + limits
}

// Guarantee is one line of SandboxReport: what holds for shell commands on this
// host, and whether it does.
type Guarantee struct {
	Name  string
	Holds bool
	Note  string
}

// SandboxReport runs a probe command the way a bot's shell command runs (at most
// 10 s) and reports which confinements hold on this host: the rlimits, the
// process limit (not for root), the seccomp filter, the network namespace, the
// sized /tmp, and cgroups (not used). An error (wrapping ErrNoSandbox) means no
// command can run at all.
func SandboxReport(ctx context.Context, opts Options) ([]Guarantee, error) {
	o := opts.withDefaults()
	out, err := probeRun(ctx, o, "cat /proc/self/status /proc/self/limits /proc/net/dev; df -k /tmp")
	if err != nil {
		return nil, err
	}
	l := o.ShellLimits
	var g []Guarantee
	rl := false // /proc/self/limits: "Max cpu time  300  301  seconds"
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "Max cpu time"); ok {
			f := strings.Fields(rest)
			rl = len(f) > 0 && f[0] == strconv.Itoa(l.CPUSeconds)
		}
	}
	g = append(g, Guarantee{"limits", rl, "memory " + sizeText(l.MemoryBytes) + " and CPU " +
		strconv.Itoa(l.CPUSeconds) + " s per process, files up to the workspace quota (rlimits)"})
	root := os.Geteuid() == 0
	g = append(g, Guarantee{"process limit", rl && !root && o.Sandbox != SandboxNone, map[bool]string{
		true:  "not enforced: the kernel exempts root from RLIMIT_NPROC; run openbot as an unprivileged user",
		false: strconv.Itoa(l.Processes) + " processes per command",
	}[root || o.Sandbox == SandboxNone]})
	if o.Sandbox == SandboxNone {
		g = append(g, Guarantee{"sandbox", false, "sandbox: none: no namespaces, no seccomp filter, the host's /tmp and network"})
	} else {
		g = append(g, Guarantee{"seccomp", strings.Contains(out, "Seccomp:\t2"), "kernel modules, ptrace, mounts, new namespaces, BPF, keyring and io_uring refused"})
		netOnly := true
		for _, line := range strings.Split(out, "\n") {
			if name, ok := iface(line); ok && name != "lo" {
				netOnly = false
			}
		}
		g = append(g, Guarantee{"network namespace", netOnly, "loopback only; bots with shell_network reach public hosts through the egress proxy"})
		g = append(g, Guarantee{"/tmp size", true, sizeText(l.TmpBytes) + " each for /tmp and /dev/shm"})
	}
	g = append(g, Guarantee{"cgroup", false, "not used: to bound the total of all commands, run openbot under a service manager with a memory and task limit (systemd MemoryMax=, TasksMax=)"})
	return g, nil
}

// iface returns the interface name of a /proc/net/dev line ("  eth0: 123 ..."
// : a name, a colon, then at least eight counters).
func iface(line string) (string, bool) {
	name, rest, ok := strings.Cut(line, ":")
	f := strings.Fields(rest)
	if !ok || len(f) < 8 || strings.ContainsAny(strings.TrimSpace(name), " \t") {
		return "", false
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return "", false
	}
	return strings.TrimSpace(name), true
}
