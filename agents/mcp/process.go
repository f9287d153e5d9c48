package mcp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"
)

// process is a started stdio server in its own process group. openbot owns
// both pipe ends it keeps, so cmd.Wait returns as soon as the server exits.
type process struct {
	cmd     *exec.Cmd
	stdin   *os.File // write end: the server's stdin
	stdout  *os.File // read end: the server's stdout
	stderrR *os.File
	stderr  *tailBuffer
	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error         // set before exited is closed
	drained chan struct{} // closed when stderr reached EOF
	stopped sync.Once
}

// serverEnv is the environment of a stdio server: a few harmless variables of
// openbot's own environment and the configured ones, or everything when
// InheritEnv is set.
func serverEnv(cfg ServerConfig, opts Options) []string {
	var env []string
	if opts.InheritEnv {
		env = os.Environ()
	} else {
		for _, k := range []string{"PATH", "HOME", "USER", "LANG", "TMPDIR"} {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+cfg.Env[k])
	}
	return env
}

func startProcess(cfg ServerConfig, opts Options) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = serverEnv(cfg, opts)
	cmd.Dir = opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	// The child has its own copies now.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	p := &process{
		cmd: cmd, stdin: inW, stdout: outR, stderrR: errR,
		stderr:  &tailBuffer{max: stderrTailSize},
		exited:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	go func() { // owned by the process: ends at EOF or when stop closes errR
		defer close(p.drained)
		buf := make([]byte, 4096)
		for {
			n, err := errR.Read(buf)
			p.stderr.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() { // owned by the process: ends when the server exits
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop closes the server's stdin, waits half of grace, sends SIGTERM to its
// process group, waits the rest and then sends SIGKILL. It returns once the
// server is reaped (SIGKILL cannot be ignored) and its pipes are closed.
func (p *process) stop(grace time.Duration) {
	p.stopped.Do(func() {
		p.stdin.Close() // also done by the transport; harmless twice
		half := grace / 2
		if !p.waitExit(half) {
			p.signal(syscall.SIGTERM)
			if !p.waitExit(grace - half) {
				p.signal(syscall.SIGKILL)
				<-p.exited
			}
		}
		p.signal(syscall.SIGKILL) // children left in the group
		p.stdout.Close()
		select {
		case <-p.drained:
		case <-time.After(time.Second): // a process outside the group holds stderr
		}
		p.stderrR.Close()
		<-p.drained
	})
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Signal(sig)
	}
}

// describe adds the exit status (when the server has exited) and the tail of
// its stderr to err.
func (p *process) describe(err error) error {
	select {
	case <-p.exited:
		if p.waitErr != nil {
			err = fmt.Errorf("%w (%w)", err, p.waitErr)
		} else {
			err = fmt.Errorf("%w (%w with status 0)", err, errExited)
		}
	default:
	}
	if tail := tailString(p.stderr.Bytes()); tail != "" {
		err = fmt.Errorf("%w; stderr: %s", err, tail)
	}
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of the kept bytes.
func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
