package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/config"
)

func TestToolOptionsSandbox(t *testing.T) {
	cfg, err := config.Parse([]byte(`
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m}}
store: {path: /srv/openbot/data/openbot.db}
bots:
  - {handle: engineer, tools: [shell], shell_network: true}
  - {handle: qa, tools: [shell]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := toolOptions(cfg, nil, ownFiles("/etc/openbot/config.yaml", cfg))
	if o.Sandbox != tools.SandboxBwrap || !o.ShellNetwork["engineer"] || o.ShellNetwork["qa"] {
		t.Errorf("sandbox %q network %v; want bwrap with the network for engineer only", o.Sandbox, o.ShellNetwork)
	}
	for _, want := range []string{"/etc/openbot/config.yaml", "/srv/openbot/data/openbot.db", "/srv/openbot/data", "/srv/openbot/data/openbot.log"} {
		if !slices.Contains(o.SandboxHide, want) {
			t.Errorf("SandboxHide %v lacks %s", o.SandboxHide, want)
		}
	}
}

func TestReportSandbox(t *testing.T) {
	cfg := &config.Config{Sandbox: config.SandboxNone, Bots: []config.Bot{{Handle: "engineer", Tools: []string{"shell"}}}}
	var logs, stderr lockedBuffer
	a := &app{chat: true, cfg: cfg, log: testLogger(&logs), stderr: &stderr}
	a.reportSandbox(context.Background(), toolOptions(cfg, nil, nil))
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "sandbox: none") ||
		!strings.Contains(stderr.String(), "shell sandbox is OFF") {
		t.Errorf("sandbox none: log %q stderr %q; want a WARN line and a terminal warning", logs.String(), stderr.String())
	}

	cfg.Sandbox = config.SandboxBwrap
	logs = lockedBuffer{}
	opts := toolOptions(cfg, nil, nil)
	opts.BwrapPath = filepath.Join(t.TempDir(), "no-bwrap")
	a.reportSandbox(context.Background(), opts)
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "apt-get install bubblewrap") {
		t.Errorf("no bwrap: log %q; want an ERROR naming the fix", logs.String())
	}
}

func TestChatWarnsWhenSandboxIsOff(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("hi"))
	dir := t.TempDir()
	path := exampleConfig(t, dir)
	replaceInFile(t, path, "sandbox: bwrap", "sandbox: none")
	r := runFor(t, []string{"chat", "--config", path}, strings.NewReader("hello\n"),
		map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 0 || !strings.Contains(r.stderr, "shell sandbox is OFF") {
		t.Errorf("exit %d stderr %q; want the warning on the terminal", r.code, r.stderr)
	}
}

// replaceInFile replaces the first old in the file with repl; old must be there.
func replaceInFile(t *testing.T, path, old, repl string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), old) {
		t.Fatalf("%s lacks %q: %v", path, old, err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, repl, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestChatApprovedShellWithoutSandbox: with no bubblewrap on PATH, the chat
// says so on the terminal, the approval prompt says the shell cannot run until
// the sandbox works, and the approved call is recorded as not run (with a
// notice in the thread), never as "ran".
func TestChatApprovedShellWithoutSandbox(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap anywhere
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		ms := r.Body.Messages
		if last := ms[len(ms)-1]; last.Role == "tool" {
			return openaitest.Text("shell said: " + strings.TrimSpace(last.Content))
		}
		return openaitest.Calls(openaitest.Call("shell", `{"command":"echo ok"}`))
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("@engineer run it\n/approve\n"), env)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "shell sandbox unavailable") || !strings.Contains(r.stderr, "apt-get install bubblewrap") {
		t.Errorf("stderr %q; want the unusable sandbox and its fix on the terminal", r.stderr)
	}
	if strings.Contains(r.stdout, "runs in a sandbox") || !strings.Contains(r.stdout, "cannot run until the sandbox works") {
		t.Errorf("the approval prompt claims a sandbox that does not work:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "did not run: shell is disabled: no sandbox") {
		t.Errorf("the thread got no notice that the approved call did not run:\n%s", r.stdout)
	}
	r = runFor(t, []string{"approvals", "list", "--config", cfg}, nil, env)
	if r.code != 0 || !strings.Contains(r.stdout, "not run: shell is disabled: no sandbox") || strings.Contains(r.stdout, "ran (") {
		t.Errorf("approvals list (exit %d):\n%s\nwant the outcome not run", r.code, r.stdout)
	}
}
