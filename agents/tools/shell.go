package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"openbot/agents"
)

// shell is the shell tool: a tool with a sandbox and a Reach description.
type shell struct {
	*tool
	sb *sandbox
}

// Reach says in one sentence what a shell command of the bot with this handle
// can reach, for the approval prompt (DESIGN.md §5, §9): the sandbox and that
// bot's network setting.
func (s *shell) Reach(bot string) string {
	return s.sb.reach(s.sb.opts.ShellNetwork[bot], s.sb.opts.limitsFor(bot))
}

func shellTool(ws *workspace, f *fetcher) agents.Tool {
	o := ws.opts
	sb := &sandbox{opts: o}
	where := "in a sandbox that sees only your workspace (at " + SandboxWorkdir + ", also HOME), " +
		"read-only system programs and an empty /tmp; the network is off unless enabled for you " +
		"(then HTTP and HTTPS to public internet hosts only, through a proxy already set in the environment)"
	if sb.none() {
		where = "in your workspace directory"
	}
	def := o.ShellLimits
	t := &tool{
		name: "shell",
		desc: fmt.Sprintf("Run a shell command (sh -c) %s, and return its exit status and "+
			"combined stdout/stderr. The environment is minimal (PATH, HOME, LANG, TERM=dumb). "+
			"The command is killed with all its child processes after %s by default (at most %s via timeout_seconds). "+
			"Limits: %s. Output beyond %d bytes keeps its beginning and end. Background processes are killed when the command ends.",
			where, def.Timeout, def.MaxTimeout, def.Describe(!sb.none()), o.OutputCap),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"The command line, run with sh -c"},` +
			`"timeout_seconds":{"type":"integer","minimum":1,"description":"Timeout in seconds"}},` +
			`"required":["command"],"additionalProperties":false}`),
	}
	t.fn = func(ctx context.Context, call agents.ToolCall) (string, error) {
		var a struct {
			Command        string `json:"command"`
			TimeoutSeconds int64  `json:"timeout_seconds"`
		}
		if err := decodeArgs(call.Args, &a); err != nil {
			return "", err
		}
		if strings.TrimSpace(a.Command) == "" {
			return "", agents.NotRun(errors.New("command is required"))
		}
		lim := o.limitsFor(call.Bot.Handle)
		if err := sb.ready(ctx); err != nil {
			return "", err
		}
		dir, err := ws.dir(call)
		if err != nil {
			return "", agents.NotRun(err)
		}
		helper, err := helperPath(o)
		if err != nil {
			return "", agents.NotRun(err)
		}
		used, uerr := usage(dir, math.MaxInt64)
		sp := spec{workspace: dir, helper: helper, limits: lim, command: a.Command,
			used: used, fsize: max(lim.WorkspaceBytes-used, 0), unmeasured: uerr}
		if uerr != nil {
			sp.fsize = 0 // nothing may grow until the command fixes it
		}
		if !sb.none() && o.ShellNetwork[call.Bot.Handle] {
			eg, err := startEgress(f.dial, o.Logger)
			if err != nil {
				return "", agents.NotRun(err)
			}
			defer eg.close()
			sp.egress = eg.sock
		}
		return sb.run(ctx, sp, lim.timeoutFor(a.TimeoutSeconds))
	}
	return &shell{tool: t, sb: sb}
}

// helperPath is the executable that serves as the sandbox helper: Options.HelperPath,
// else openbot's own.
func helperPath(o Options) (string, error) {
	if o.HelperPath != "" {
		return o.HelperPath, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find openbot's executable for the shell helper: %w", err)
	}
	return p, nil
}

// shellEnv is the whole environment of a command: nothing is inherited from the
// openbot process, so no secret in its environment reaches the command.
func shellEnv(o Options, dir string) []string {
	env := []string{
		"PATH=" + o.ShellPath,
		"HOME=" + dir,
		"LANG=C.UTF-8",
		"TERM=dumb",
	}
	keys := make([]string, 0, len(o.ShellEnv))
	for k := range o.ShellEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+o.ShellEnv[k])
	}
	return env
}

// run runs the command of sp (under bubblewrap, or with `sandbox: none` under
// the helper on the host) in its own process group and returns its result. The
// whole command is killed when the timeout passes, when ctx is done, when the
// workspace passes its quota, and as soon as it exits (stray background
// children). Under bwrap its pid namespace takes every process with it; with
// `sandbox: none` the helper, a child subreaper, kills every process left below
// it. Both die with openbot (a parent-death signal), and each running command is
// registered in Options.StateDir so a restart ends any that survived
// (KillOrphans). Output goes through a pipe we own, so a process that escaped
// and holds it open delays the result by at most Options.ShellKillDelay.
func (sb *sandbox) run(ctx context.Context, sp spec, timeout time.Duration) (string, error) {
	o := sb.opts
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd, err := sb.command(ctx, &sp)
	if err != nil {
		return "", err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("run command: %v", err)
	}
	defer pr.Close()
	cmd.Stdout = pw // an *os.File: the child writes to it directly
	cmd.Stderr = pw
	start := time.Now()
	err = cmd.Start()
	if err != nil && sb.none() && cmd.SysProcAttr.Cloneflags != 0 {
		// No namespaces on this host (often why it runs without a sandbox):
		// the supervisor alone keeps the command's processes in check.
		o.Logger.Warn("shell: cannot make a pid namespace for commands with sandbox: none; a command that kills its supervisor may leave processes behind", "err", err)
		sb.noPidNS.Store(true)
		if cmd, err = sb.command(ctx, &sp); err == nil {
			cmd.Stdout, cmd.Stderr = pw, pw
			err = cmd.Start()
		}
	}
	if err != nil {
		pw.Close()
		closeExtra(cmd)
		return "", fmt.Errorf("run command: %v", err)
	}
	pw.Close()
	closeExtra(cmd)
	unregister := register(o.StateDir, cmd.Process.Pid, o.Logger)
	out := newHeadTail(o.OutputCap)
	copied := make(chan struct{})
	go func() { // owned here: joined below before returning
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	// A workspace already over its quota may shrink (rm), not grow.
	quota := watchQuota(ctx, sp, max(sp.limits.WorkspaceBytes, sp.used), cancel)
	err = cmd.Wait()
	ctxErr := ctx.Err() // before cancel, which stops the quota watcher
	_ = killGroup(cmd)  // background children left behind
	unregister()
	cancel()
	stopped := <-quota
	select {
	case <-copied:
	case <-time.After(o.ShellKillDelay):
		pr.Close() // unblocks the copy
		<-copied
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	text := out.String()
	switch {
	case stopped != "":
		return "", fmt.Errorf("command stopped: limit reached: %s\noutput so far:\n%s", stopped, text)
	case errors.Is(ctxErr, context.DeadlineExceeded):
		return "", fmt.Errorf("command timed out after %s; its processes were killed\noutput so far:\n%s", timeout, text)
	case ctxErr != nil:
		return "", fmt.Errorf("command was cancelled; its processes were killed\noutput so far:\n%s", text)
	}
	status, sig := 0, ""
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return "", fmt.Errorf("run command: %v\n%s", err, text)
		}
		status = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() { // the supervisor itself was killed
			status = 128 + int(ws.Signal())
		}
		if status > 128 && status < 128+65 {
			sig = unix.SignalName(syscall.Signal(status - 128))
		}
	}
	if text == "" {
		text = "(no output)"
	}
	head := fmt.Sprintf("exit status: %d (%s)", status, elapsed)
	if sig != "" {
		head = fmt.Sprintf("exit status: %d, killed by %s (%s)", status, sig, elapsed)
	}
	res := head + "\n" + text
	if sp.unmeasured != nil {
		res += fmt.Sprintf("\nnote: %v; no file could grow until that is fixed (make the folder readable, or remove it)", sp.unmeasured)
	}
	if hit := limitHit(sp.limits, sig, text, false); hit != "" && status != 0 {
		res += "\nlimit reached: " + hit
	}
	return res, nil
}

// command builds the exec.Cmd of sp: bwrap reading its arguments from a pipe
// (fd 3), or with `sandbox: none` the helper on the host.
func (sb *sandbox) command(ctx context.Context, sp *spec) (*exec.Cmd, error) {
	o := sb.opts
	if sb.none() {
		sp.env = shellEnv(o, sp.workspace)
		argv := helperArgv(sp.helper, *sp, true)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = sp.workspace, sp.env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if !sb.noPidNS.Load() {
			// The supervisor is the init of a pid namespace of its own: the
			// command cannot kill it, and every process of the command dies
			// with it. A user namespace mapping only openbot's own ids lets an
			// unprivileged openbot make one.
			a := cmd.SysProcAttr
			a.Cloneflags = syscall.CLONE_NEWPID
			if os.Geteuid() != 0 {
				a.Cloneflags |= syscall.CLONE_NEWUSER
				a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
				a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
			}
		}
		// The supervisor kills everything below it when told to stop; the
		// group is killed after it in any case.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = o.ShellKillDelay
		return cmd, nil
	}
	bwrap, err := exec.LookPath(o.BwrapPath)
	if err != nil { // removed since the probe
		sb.ok.Store(false)
		return nil, fmt.Errorf("%w: bubblewrap (%q) was not found: %s", ErrNoSandbox, o.BwrapPath, fixHint)
	}
	sp.env = sandboxEnv(o, sp.egress != "")
	args := bwrapArgs(o, *sp)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("run command: %v", err)
	}
	go func() { // ends when the arguments are written or bwrap is gone
		defer w.Close()
		for _, a := range args {
			if _, err := w.WriteString(a + "\x00"); err != nil {
				return
			}
		}
	}()
	cmd := exec.CommandContext(ctx, bwrap, append([]string{"--args", "3", "--"}, helperArgv(helperInSandbox, *sp, false)...)...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Dir, cmd.Env = sp.workspace, sp.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = o.ShellKillDelay
	return cmd, nil
}

// closeExtra closes the parent's copies of the files passed to the child.
func closeExtra(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
}

// watchQuota measures the workspace while a command runs, every 100 ms or ten
// times as long as one measure took, at most every second, and calls stop when
// it passes quota, or when it can no longer be measured whole while it could at
// the start (sp.unmeasured is nil). The returned channel yields the reason it
// stopped the command ("" for none), once ctx is done.
func watchQuota(ctx context.Context, sp spec, quota int64, stop func()) <-chan string {
	res := make(chan string, 1)
	go func() {
		wait := 100 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				res <- ""
				return
			case <-time.After(wait):
			}
			t0 := time.Now()
			n, err := usage(sp.workspace, quota)
			switch {
			case n > quota:
				stop()
				res <- limitHit(sp.limits, "", "", true)
				return
			case err != nil && sp.unmeasured == nil:
				stop()
				res <- fmt.Sprintf("%v: it counts as over the quota; the command was stopped", err)
				return
			}
			wait = min(max(100*time.Millisecond, 10*time.Since(t0)), time.Second)
		}
	}()
	return res
}

// killGroup sends SIGKILL to the command's whole process group.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
