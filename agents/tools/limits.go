package tools

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

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
// except where noted; `doctor` says which hold on a host. Every command also
// starts with a soft open-file limit of 1024 (the Linux default), which it may
// raise up to the hard limit itself.
type ShellLimits struct {
	// Processes caps the processes and threads the command may have at once
	// (RLIMIT_NPROC, counted inside the sandbox's user namespace). The kernel
	// does not apply it when openbot runs as root.
	Processes int
	// MemoryBytes caps each process's data memory (RLIMIT_DATA: heap and
	// private writable mappings); its address space is capped at twice that
	// plus 1 GiB (RLIMIT_AS, room for runtimes that reserve more than they
	// use), which bounds shared mappings and the stack too. Memory held
	// in shared memory objects a process does not map is not bounded.
	MemoryBytes int64
	// CPUSeconds caps each process's CPU time (RLIMIT_CPU): SIGXCPU at the
	// limit, SIGKILL 1 s later.
	CPUSeconds int
	// TmpBytes is the size of the sandbox's /tmp and of its /dev/shm, each a
	// tmpfs held in host memory (bwrap only; with `sandbox: none` /tmp is the host's).
	TmpBytes int64
	// WorkspaceBytes is the thread workspace's quota, counted in allocated
	// blocks with at least 4 KiB an entry: no file may grow past what is left
	// of it (RLIMIT_FSIZE; fallocate is refused), and the command is stopped
	// when the workspace passes it (checked every 100 ms to 1 s while it runs) or
	// cannot be measured whole (an unreadable folder, or one nested more than
	// 128 deep).
	WorkspaceBytes int64
	// Timeout is a command's wall-clock limit when the model asks for none;
	// MaxTimeout the most the model may ask for (timeout_seconds is capped to
	// it). At MaxTimeout's end the whole command is killed.
	Timeout    time.Duration
	MaxTimeout time.Duration
}

// or returns l with each zero field taken from d.
func (l ShellLimits) or(d ShellLimits) ShellLimits {
	// config refuses negative values, so zero is the only unset one.
	l.Processes = cmp.Or(l.Processes, d.Processes)
	l.MemoryBytes = cmp.Or(l.MemoryBytes, d.MemoryBytes)
	l.CPUSeconds = cmp.Or(l.CPUSeconds, d.CPUSeconds)
	l.TmpBytes = cmp.Or(l.TmpBytes, d.TmpBytes)
	l.WorkspaceBytes = cmp.Or(l.WorkspaceBytes, d.WorkspaceBytes)
	l.Timeout = cmp.Or(l.Timeout, d.Timeout)
	l.MaxTimeout = max(cmp.Or(l.MaxTimeout, d.MaxTimeout), l.Timeout)
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

// Measuring a workspace for its quota (usage).
const (
	// minEntryBytes is the least an entry counts: an empty file or a link
	// still takes an inode and a directory entry.
	minEntryBytes = 4 << 10
	// maxDepth is the deepest directory usage descends into.
	maxDepth = 128
)

// errUnmeasured is returned by usage for a workspace it cannot measure whole:
// an unreadable directory, or one nested deeper than maxDepth.
var errUnmeasured = errors.New("the workspace cannot be measured whole")

// usage is what dir holds on disk: each entry's allocated blocks (so space
// reserved past a file's size counts), at least minEntryBytes an entry,
// directories and links included. It walks by directory file descriptors, so
// no path is too long for it and no link is followed. It returns as soon as
// the sum passes stopAt. An entry it cannot read makes it return what it has
// counted with an error wrapping errUnmeasured.
func usage(dir string, stopAt int64) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", errUnmeasured, dir, err)
	}
	var n int64
	var walk func(fd, depth int, at string) error
	walk = func(fd, depth int, at string) error {
		f := os.NewFile(uintptr(fd), at)
		defer f.Close()
		if depth > maxDepth {
			return fmt.Errorf("%w: %s is nested deeper than %d folders", errUnmeasured, at, maxDepth)
		}
		for {
			names, err := f.Readdirnames(256)
			for _, name := range names {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if errors.Is(err, unix.ENOENT) {
						continue
					}
					return fmt.Errorf("%w: %s/%s: %v", errUnmeasured, at, name, err)
				}
				n += max(st.Blocks*512, minEntryBytes)
				if n > stopAt {
					return nil
				}
				if st.Mode&unix.S_IFMT != unix.S_IFDIR {
					continue
				}
				cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				if err != nil {
					return fmt.Errorf("%w: %s/%s: %v", errUnmeasured, at, name, err)
				}
				if err := walk(cfd, depth+1, at+"/"+name); err != nil || n > stopAt {
					return err
				}
			}
			if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errUnmeasured, at, err)
			}
		}
	}
	err = walk(fd, 0, ".")
	return n, err
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
