package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"openbot/agents"
	"openbot/core"
)

// modes runs f once under bubblewrap and once with `sandbox: none`: process
// group handling must hold in both.
func modes(t *testing.T, f func(t *testing.T, sandbox string)) {
	for _, m := range []string{SandboxBwrap, SandboxNone} {
		t.Run(m, func(t *testing.T) {
			if m == SandboxBwrap {
				requireBwrap(t)
			}
			f(t, m)
		})
	}
}

func TestShellTimeoutKillsProcessGroup(t *testing.T) {
	modes(t, func(t *testing.T, sandbox string) {
		tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), Sandbox: sandbox, ShellLimits: ShellLimits{Timeout: time.Second}})
		bg := sleepMarker()
		// The background sleep keeps the group alive after sh would be killed
		// alone; it also holds the output pipe open.
		got, err := call(t, tl["shell"], nil, map[string]any{
			"command": "sleep " + bg + " & echo started; sleep " + sleepMarker(),
		})
		if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "started") {
			t.Fatalf("got %q, %v; want a timeout error with the output so far", got, err)
		}
		waitNoSleep(t, bg)
	})
}

func TestShellCancelKillsProcessGroup(t *testing.T) {
	modes(t, func(t *testing.T, sandbox string) {
		root := t.TempDir()
		tl := builtins(t, Options{WorkspaceRoot: root, Sandbox: sandbox})
		ctx, cancel := context.WithCancel(context.Background())
		bg := sleepMarker()
		done := make(chan error, 1)
		go func() {
			_, err := tl["shell"].Call(ctx, agents.ToolCall{
				Args:   json.RawMessage(`{"command":"sleep ` + bg + ` & sleep 300"}`),
				Thread: 7,
			})
			done <- err
		}()
		// The command forks the background sleep first; once it has exec'd the
		// command is under way.
		waitSleeps(t, bg, "the background sleep is not visible from the host", func(n int) bool { return n > 0 })
		cancel()
		if err := <-done; err == nil || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("err = %v, want cancelled", err)
		}
		waitNoSleep(t, bg)
	})
}

func TestShellKillsBackgroundChildrenOnExit(t *testing.T) {
	modes(t, func(t *testing.T, sandbox string) {
		tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), Sandbox: sandbox})
		bg := sleepMarker()
		got, err := call(t, tl["shell"], nil, map[string]any{"command": "sleep " + bg + " & echo ok"})
		if err != nil || !strings.HasPrefix(got, "exit status: 0") || !strings.Contains(got, "ok") {
			t.Fatalf("got %q, %v", got, err)
		}
		waitNoSleep(t, bg)
	})
}

func TestShellOutputCapKeepsHeadAndTail(t *testing.T) {
	requireBwrap(t)
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), OutputCap: 1000})
	got, err := call(t, tl["shell"], nil, map[string]any{
		"command": "echo FIRSTLINE; i=0; while [ $i -lt 3000 ]; do echo filler-line-$i; i=$((i+1)); done; echo LASTLINE >&2",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FIRSTLINE", "LASTLINE", "bytes omitted ..."} {
		if !strings.Contains(got, want) {
			t.Errorf("output missing %q", want)
		}
	}
	if len(got) > 1200 {
		t.Errorf("output is %d bytes, want about 1000", len(got))
	}
	if strings.Contains(got, "filler-line-1500\n") {
		t.Error("middle of the output was kept")
	}
}

func TestShellEnvironmentIsMinimal(t *testing.T) {
	requireBwrap(t)
	t.Setenv("OPENBOT_CANARY_SECRET", "canary-value-1234")
	t.Setenv("OPENAI_API_KEY", "sk-canary")
	root := t.TempDir()
	tl := builtins(t, Options{WorkspaceRoot: root, ShellEnv: map[string]string{"EXTRA": "set-by-operator"}})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": "env; pwd"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"canary-value-1234", "sk-canary", "OPENBOT_CANARY_SECRET"} {
		if strings.Contains(got, bad) {
			t.Errorf("environment leaked %q:\n%s", bad, got)
		}
	}
	ws := SandboxWorkdir
	for _, want := range []string{"HOME=" + ws, "TERM=dumb", "PATH=" + DefaultShellPath, "EXTRA=set-by-operator", "\n" + ws + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output missing %q:\n%s", want, got)
		}
	}
}

func TestShellExitStatus(t *testing.T) {
	requireBwrap(t)
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": "echo oops >&2; exit 3"})
	if err != nil || !strings.HasPrefix(got, "exit status: 3") || !strings.Contains(got, "oops") {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := call(t, tl["shell"], nil, map[string]any{"command": " "}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, err := call(t, tl["shell"], nil, map[string]any{"cmd": "ls"}); err == nil {
		t.Fatal("unknown argument accepted")
	}
}

func TestTodoWriteAndPostMessage(t *testing.T) {
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	env := &fakeEnv{}
	got, err := call(t, tl["todo_write"], env, map[string]any{"items": []core.TodoItem{
		{Text: "read the spec", Status: "done"},
		{Text: "write code", Status: "in_progress"},
		{Text: "ship", Status: "pending"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "todo list updated:\n- [x] read the spec\n- [~] write code\n- [ ] ship"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if len(env.Todos) != 3 || env.Todos[1].Status != "in_progress" {
		t.Fatalf("stored todo = %+v", env.Todos)
	}
	if _, err := call(t, tl["todo_write"], env, map[string]any{"items": []core.TodoItem{{Text: "x", Status: "later"}}}); err == nil {
		t.Fatal("bad status accepted")
	}
	if len(env.Todos) != 3 {
		t.Fatal("invalid list replaced the stored one")
	}
	got, err = call(t, tl["post_message"], env, map[string]any{"text": "halfway there"})
	if err != nil || got != "posted message 1001" || len(env.Posted) != 1 || env.Posted[0] != "halfway there" {
		t.Fatalf("post: %q %v %v", got, err, env.Posted)
	}
}
