package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// netEtcFiles are added when the bot's shell network is on: name resolution and
// the CA certificates TLS clients need.
var netEtcFiles = []string{
	"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/services",
	"/etc/protocols", "/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf",
}

// sandbox builds the shell's bubblewrap command lines and remembers a
// successful probe, so the probe runs once per process when all is well and
// again on every call while it fails (the refusal then names the fix).
type sandbox struct {
	opts Options
	ok   atomic.Bool
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
	path, err := exec.LookPath(o.BwrapPath)
	if err != nil {
		return fmt.Errorf("%w: bubblewrap (%q) was not found: %s", ErrNoSandbox, o.BwrapPath, fixHint)
	}
	dir, err := os.MkdirTemp("", "openbot-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("%w: probe directory: %v", ErrNoSandbox, err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	env := sandboxEnv(o)
	cmd := exec.CommandContext(ctx, path, bwrapArgs(o, dir, false, env, "true")...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return fmt.Errorf("%w: %s does not work here (%v: %s): allow unprivileged user namespaces "+
			"(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or %s",
			ErrNoSandbox, path, err, msg, fixHint)
	}
	return nil
}

// sandboxEnv is the whole environment inside the sandbox (and of the bwrap
// process itself, whose /proc/1/environ the sandbox can read).
func sandboxEnv(o Options) []string {
	return shellEnv(o, SandboxWorkdir)
}

// bwrapArgs returns bubblewrap's arguments to run `/bin/sh -c command` with
// workspace (an absolute host directory) read-write at SandboxWorkdir. network
// keeps the host's network namespace; otherwise the sandbox has only its own
// loopback. Nothing of openbot's process, environment, config, store, logs,
// /home, /root or the rest of the host file system is mounted.
func bwrapArgs(o Options, workspace string, network bool, env []string, command string) []string {
	a := []string{"--unshare-all"}
	if network {
		a = append(a, "--share-net")
	}
	a = append(a, "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--hostname", "sandbox", "--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	binds := map[string]string{workspace: SandboxWorkdir} // host source -> sandbox path
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
	if network {
		etc = append(append([]string(nil), etcFiles...), netEtcFiles...)
	}
	for _, f := range etc {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", workspace, SandboxWorkdir)
	a = append(a, hideArgs(o.SandboxHide, binds)...)
	// The root is bwrap's own tmpfs; read-only, so only the workspace and /tmp
	// (a fresh tmpfs) can be written.
	return append(a, "--remount-ro", "/", "--chdir", SandboxWorkdir, "--", "/bin/sh", "-c", command)
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
// setting can reach, for approval prompts. Until a probe has succeeded it
// probes the sandbox (at most probeTimeout), so a prompt never claims a
// sandbox that does not work: then it says the shell cannot run at all.
func (s *sandbox) reach(network bool) string {
	if s.none() {
		return "runs WITHOUT a sandbox: sees everything openbot can (its files, environment and network)"
	}
	if err := s.ready(context.Background()); err != nil {
		return "cannot run until the sandbox works (bubblewrap is missing or not usable here): approving it runs nothing"
	}
	if network {
		return "runs in a sandbox: sees only this thread's workspace, network on"
	}
	return "runs in a sandbox: sees only this thread's workspace, network off"
}
