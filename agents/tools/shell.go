package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

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
	return s.sb.reach(s.sb.opts.ShellNetwork[bot])
}

func shellTool(ws *workspace) agents.Tool {
	o := ws.opts
	sb := &sandbox{opts: o}
	where := "in a sandbox that sees only your workspace (at " + SandboxWorkdir + ", also HOME), " +
		"read-only system programs and an empty /tmp; the network is off unless enabled for you"
	if sb.none() {
		where = "in your workspace directory"
	}
	t := &tool{
		name: "shell",
		desc: fmt.Sprintf("Run a shell command (sh -c) %s, and return its exit status and "+
			"combined stdout/stderr. The environment is minimal (PATH, HOME, LANG, TERM=dumb). "+
			"The command is killed with all its child processes after %s by default (at most %s via timeout_seconds). "+
			"Output beyond %d bytes keeps its beginning and end. Background processes are killed when the command ends.",
			where, o.ShellTimeout, o.ShellMaxTimeout, o.OutputCap),
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
		timeout := o.ShellTimeout
		if a.TimeoutSeconds > 0 {
			timeout = min(time.Duration(a.TimeoutSeconds)*time.Second, o.ShellMaxTimeout)
		}
		if err := sb.ready(ctx); err != nil {
			return "", err
		}
		dir, err := ws.dir(call)
		if err != nil {
			return "", agents.NotRun(err)
		}
		if sb.none() {
			return runShell(ctx, o, []string{"/bin/sh", "-c", a.Command}, dir, shellEnv(o, dir), timeout)
		}
		bwrap, err := exec.LookPath(o.BwrapPath)
		if err != nil { // removed since the probe
			sb.ok.Store(false)
			return "", fmt.Errorf("%w: bubblewrap (%q) was not found: %s", ErrNoSandbox, o.BwrapPath, fixHint)
		}
		env := sandboxEnv(o)
		argv := append([]string{bwrap}, bwrapArgs(o, dir, o.ShellNetwork[call.Bot.Handle], env, a.Command)...)
		return runShell(ctx, o, argv, dir, env, timeout)
	}
	return &shell{tool: t, sb: sb}
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

// runShell runs argv (sh -c, or bwrap wrapping it) in dir with env, in its own
// process group; the group is killed with SIGKILL when the timeout passes, when
// ctx is done, and as soon as the command exits (stray background children).
// Under bwrap the group is bwrap itself; its --die-with-parent and the pid
// namespace take every process of the sandbox with it. Output goes through a
// pipe we own, so a process that escaped the group and holds it open delays
// the result by at most Options.ShellKillDelay.
func runShell(ctx context.Context, o Options, argv []string, dir string, env []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = o.ShellKillDelay
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("run command: %v", err)
	}
	defer pr.Close()
	cmd.Stdout = pw // an *os.File: the child writes to it directly
	cmd.Stderr = pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		return "", fmt.Errorf("run command: %v", err)
	}
	pw.Close()
	out := newHeadTail(o.OutputCap)
	copied := make(chan struct{})
	go func() { // owned here: joined below before returning
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	err = cmd.Wait()
	_ = killGroup(cmd) // background children left behind
	select {
	case <-copied:
	case <-time.After(o.ShellKillDelay):
		pr.Close() // unblocks the copy
		<-copied
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	text := out.String()
	if ctx.Err() != nil {
		why := fmt.Sprintf("timed out after %s", timeout)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "was cancelled"
		}
		return "", fmt.Errorf("command %s; its process group was killed\noutput so far:\n%s", why, text)
	}
	status := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return "", fmt.Errorf("run command: %v\n%s", err, text)
		}
		status = ee.ExitCode()
	}
	if text == "" {
		text = "(no output)"
	}
	return fmt.Sprintf("exit status: %d (%s)\n%s", status, elapsed, text), nil
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
