package tools

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"openbot/core"
)

// Defaults of ShellLimits, applied field by field to zero values.
const (
	DefaultShellProcesses     = 256
	DefaultShellMemoryBytes   = 2 << 30
	DefaultShellCPUSeconds    = 300
	DefaultShellTmpBytes      = 256 << 20
	DefaultShellWorkspaceByte = 2 << 30
	DefaultShellTimeout       = 60 * time.Second
	DefaultShellMaxTimeout    = 5 * time.Minute
)

// ShellLimits bound one shell command (config `shell_limits`, globally and per
// bot). Zero fields take the Default* values. They hold in every sandbox mode
// except where noted; `doctor` says which hold on a host.
type ShellLimits struct {
	// Processes caps the processes and threads the command may have at once
	// (RLIMIT_NPROC, counted inside the sandbox's user namespace). The kernel
	// does not apply it when openbot runs as root.
	Processes int
	// MemoryBytes caps each process's data memory (RLIMIT_DATA: heap and
	// private writable mappings).
	MemoryBytes int64
	// CPUSeconds caps each process's CPU time (RLIMIT_CPU): SIGXCPU at the
	// limit, SIGKILL 5 s later.
	CPUSeconds int
	// TmpBytes is the size of the sandbox's /tmp and of its /dev/shm, each a
	// tmpfs held in host memory (bwrap only; with `sandbox: none` /tmp is the host's).
	TmpBytes int64
	// WorkspaceBytes is the thread workspace's quota: no file may grow past
	// what is left of it (RLIMIT_FSIZE), and the command is stopped when the
	// workspace passes it (checked every 100 ms while it runs, less often for a workspace that takes long to measure).
	WorkspaceBytes int64
	// Timeout is a command's wall-clock limit when the model asks for none;
	// MaxTimeout the most the model may ask for (timeout_seconds is capped to
	// it). At MaxTimeout's end the whole command is killed.
	Timeout    time.Duration
	MaxTimeout time.Duration
}

// or returns l with each zero field taken from d.
func (l ShellLimits) or(d ShellLimits) ShellLimits {
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = d.TmpBytes
	}
	if l.WorkspaceBytes <= 0 {
		l.WorkspaceBytes = d.WorkspaceBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxTimeout <= 0 {
		l.MaxTimeout = d.MaxTimeout
	}
	if l.MaxTimeout < l.Timeout {
		l.MaxTimeout = l.Timeout
	}
	return l
}

// defaultShellLimits are the built-in defaults.
var defaultShellLimits = ShellLimits{
	Processes: DefaultShellProcesses, MemoryBytes: DefaultShellMemoryBytes, CPUSeconds: DefaultShellCPUSeconds,
	TmpBytes: DefaultShellTmpBytes, WorkspaceBytes: DefaultShellWorkspaceByte,
	Timeout: DefaultShellTimeout, MaxTimeout: DefaultShellMaxTimeout,
}

// limitsFor returns the limits of a bot's commands: its own, else the global ones,
// else the defaults, field by field.
func (o Options) limitsFor(bot string) ShellLimits {
	return o.BotShellLimits[bot].or(o.ShellLimits)
}

// timeoutFor is the timeout of one call: the one asked for, capped at
// MaxTimeout, else Timeout.
func (l ShellLimits) timeoutFor(requestedSeconds int64) time.Duration {
	if requestedSeconds <= 0 {
		return l.Timeout
	}
	if requestedSeconds > int64(l.MaxTimeout/time.Second) {
		return l.MaxTimeout
	}
	return time.Duration(requestedSeconds) * time.Second
}

// Describe is the limits in one line for people and the model: "at most 256
// processes, 2 GiB memory and 300 s CPU per process, /tmp 256 MiB, workspace 2 GiB".
func (l ShellLimits) Describe(sandboxed bool) string {
	s := fmt.Sprintf("at most %d processes, %s memory and %d s CPU per process",
		l.Processes, sizeText(l.MemoryBytes), l.CPUSeconds)
	if sandboxed {
		s += fmt.Sprintf(", /tmp %s", sizeText(l.TmpBytes))
	}
	return s + fmt.Sprintf(", workspace %s", sizeText(l.WorkspaceBytes))
}

// dirSize is the bytes of the regular files under dir (apparent sizes; a link
// counts as itself, not its target). Entries that vanish while it walks are
// skipped.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// limitHit names the limit a finished command most likely ran into, from how it
// ended and what it printed, or "" for none: a signal the kernel sends at a
// limit, or the error text programs print when a limit refuses them.
func limitHit(l ShellLimits, sig string, out string, quotaPassed bool) string {
	switch {
	case quotaPassed:
		return fmt.Sprintf("the workspace quota (%s) was passed; the command was stopped", sizeText(l.WorkspaceBytes))
	case sig == "SIGXCPU" || (sig == "SIGKILL" && strings.Contains(out, "CPU time limit")):
		return fmt.Sprintf("CPU time limit (%d s per process)", l.CPUSeconds)
	case sig == "SIGXFSZ" || strings.Contains(out, "File too large") || strings.Contains(out, "File size limit"):
		return fmt.Sprintf("file size limit: the workspace quota (%s) leaves no more room", sizeText(l.WorkspaceBytes))
	}
	low := strings.ToLower(out)
	switch {
	case strings.Contains(low, "cannot fork") || strings.Contains(low, "fork: retry") ||
		strings.Contains(low, "fork failed") || strings.Contains(low, "resource temporarily unavailable"):
		return fmt.Sprintf("process limit (%d processes)", l.Processes)
	case strings.Contains(low, "cannot allocate memory") || strings.Contains(low, "memoryerror") ||
		strings.Contains(low, "out of memory") || strings.Contains(low, "memory exhausted") || strings.Contains(low, "bad_alloc"):
		return fmt.Sprintf("memory limit (%s per process)", sizeText(l.MemoryBytes))
	case strings.Contains(low, "no space left on device"):
		return fmt.Sprintf("no space left: /tmp and /dev/shm hold %s each", sizeText(l.TmpBytes))
	}
	return ""
}

// sizeText is n bytes for people: whole GiB or MiB where exact.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return core.HumanSize(n)
}
