package config

import "time"

// ShellLimits bound each shell command (top-level `shell_limits`, and per bot
// `shell_limits`, whose keys override the top-level ones one by one). Zero or
// absent keys take openbot's defaults: 256 processes, 2048 MiB memory and 300 s
// CPU per process, 256 MiB /tmp, 2048 MiB workspace, a 60 s timeout that the
// model may raise to at most 300 s.
type ShellLimits struct {
	// Processes caps the processes and threads a command has at once.
	Processes int `yaml:"processes"`
	// MemoryMB caps each process's data memory, in MiB.
	MemoryMB int64 `yaml:"memory_mb"`
	// CPUSeconds caps each process's CPU time.
	CPUSeconds int `yaml:"cpu_seconds"`
	// TmpMB is the size of the sandbox's /tmp and of its /dev/shm, each, in MiB.
	TmpMB int64 `yaml:"tmp_mb"`
	// WorkspaceMB is the thread workspace's quota, in MiB.
	WorkspaceMB int64 `yaml:"workspace_mb"`
	// TimeoutSeconds is a command's timeout when the model asks for none;
	// MaxTimeoutSeconds the most it may ask for.
	TimeoutSeconds    int `yaml:"timeout_seconds"`
	MaxTimeoutSeconds int `yaml:"max_timeout_seconds"`
}

// Timeouts returns the two timeouts as durations (zero when unset).
func (l ShellLimits) Timeouts() (timeout, max time.Duration) {
	return time.Duration(l.TimeoutSeconds) * time.Second, time.Duration(l.MaxTimeoutSeconds) * time.Second
}

// validate adds a problem for each negative key under path.
func (l ShellLimits) validate(p *problems, path string) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"processes", int64(l.Processes)}, {"memory_mb", l.MemoryMB}, {"cpu_seconds", int64(l.CPUSeconds)},
		{"tmp_mb", l.TmpMB}, {"workspace_mb", l.WorkspaceMB}, {"timeout_seconds", int64(l.TimeoutSeconds)},
		{"max_timeout_seconds", int64(l.MaxTimeoutSeconds)},
	} {
		if f.v < 0 {
			p.add(path+"."+f.name, "must not be negative, got %d", f.v)
		}
	}
	if l.TimeoutSeconds > 0 && l.MaxTimeoutSeconds > 0 && l.TimeoutSeconds > l.MaxTimeoutSeconds {
		p.add(path+".timeout_seconds", "%d is above max_timeout_seconds (%d)", l.TimeoutSeconds, l.MaxTimeoutSeconds)
	}
}
