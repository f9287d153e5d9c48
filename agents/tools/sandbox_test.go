package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openbot/agents"
	"openbot/core"
)

// Secrets set in the test process's environment; none may show in a sandbox.
var canaries = map[string]string{
	"OPENAI_API_KEY":       "sk-canary-model-key-4821",
	"SLACK_BOT_TOKEN":      "xoxb-canary-slack-token-4821",
	"TELEGRAM_BOT_TOKEN":   "123:canary-telegram-token-4821",
	"OPENBOT_CANARY_TOKEN": "canary-platform-token-4821",
}

func setCanaries(t *testing.T) {
	for k, v := range canaries {
		t.Setenv(k, v)
	}
}

func noCanary(t *testing.T, out string) {
	t.Helper()
	for k, v := range canaries {
		if strings.Contains(out, v) || strings.Contains(out, k) {
			t.Errorf("sandbox output shows %s:\n%s", k, out)
		}
	}
}

func TestSandboxHidesOpenbotEnvironment(t *testing.T) {
	requireBwrap(t)
	setCanaries(t)
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	// The parent of sh, pid 1, and every process the sandbox can see.
	got, err := call(t, tl["shell"], nil, map[string]any{"command": `echo PPID=$PPID; ` +
		`tr '\0' '\n' < /proc/$PPID/environ; tr '\0' '\n' < /proc/1/environ; ` +
		`for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; tr '\0' ' ' < $p/cmdline; echo; done 2>&1`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "PATH="+DefaultShellPath) {
		t.Fatalf("the environ files were not readable, so this test proves nothing:\n%s", got)
	}
	noCanary(t, got)
	// t.Setenv does not change /proc/self/environ: also look for the test
	// process's own start-up environment, which is what a child would see.
	inside := map[string]bool{}
	for _, kv := range shellEnv(Options{}.withDefaults(), SandboxWorkdir) {
		inside[kv] = true
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[l] = true
	}
	own, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(own), "\x00") {
		if kv != "" && !inside[kv] && lines[kv] {
			t.Errorf("sandbox shows openbot's environment entry %q", kv)
		}
	}
}

func TestSandboxHidesOpenbotProcesses(t *testing.T) {
	requireBwrap(t)
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": `ps -e -o pid=,comm=; cat /proc/[0-9]*/comm; ` +
		fmt.Sprintf("kill -0 %d && echo SIGNALLED", os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Base(os.Args[0]) // the test binary stands in for openbot
	if len(self) > 15 {
		self = self[:15] // comm is at most 15 bytes
	}
	if strings.Contains(got, self) || strings.Contains(got, "SIGNALLED") {
		t.Errorf("the sandbox sees or signals the host process %q:\n%s", self, got)
	}
	if !strings.Contains(got, "sh") || !strings.Contains(got, "ps") {
		t.Fatalf("ps did not run:\n%s", got)
	}
}

func TestSandboxHidesConfigStoreAndHome(t *testing.T) {
	requireBwrap(t)
	outside := t.TempDir()
	cfg := filepath.Join(outside, "config.yaml")
	store := filepath.Join(outside, "openbot.db")
	for _, f := range []string{cfg, store} {
		if err := os.WriteFile(f, []byte("secret-file-content-4821"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": fmt.Sprintf(
		"cat %s; cat %s; ls %s; ls /root /home /work /etc/shadow 2>&1; exit 0", cfg, store, outside)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "secret-file-content") {
		t.Errorf("config or store readable from the sandbox:\n%s", got)
	}
	if !strings.Contains(got, "No such file") {
		t.Errorf("want 'No such file' for the outside paths:\n%s", got)
	}
}

func TestSandboxMasksHiddenFilesInsideTheWorkspace(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir() // shared workspace that (wrongly) also holds the config
	cfg := filepath.Join(root, "config.yaml")
	if err := os.WriteFile(cfg, []byte("secret-file-content-4821"), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := builtins(t, Options{WorkspaceRoot: root, SharedWorkspace: true, SandboxHide: []string{cfg}})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": "cat config.yaml; echo [read]; echo x > config.yaml; ls"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "secret-file-content") || !strings.Contains(got, "[read]") {
		t.Errorf("hidden file readable:\n%s", got)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "secret-file-content-4821" {
		t.Errorf("hidden file changed to %q", b)
	}
}

func TestSandboxWritesOnlyTheWorkspace(t *testing.T) {
	requireBwrap(t)
	root := t.TempDir()
	outside := t.TempDir()
	// Host paths a broken sandbox would write; removed again if it does.
	name := "openbot-sandbox-escape-" + sleepMarker()
	hostFiles := []string{"/usr/" + name, "/" + name}
	t.Cleanup(func() {
		for _, f := range hostFiles {
			os.Remove(f)
		}
	})
	tl := builtins(t, Options{WorkspaceRoot: root})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": fmt.Sprintf(
		// Refuse to try anything outside a sandbox: a broken one must not
		// write on the host.
		"[ \"$(pwd)\" = %[4]s ] || { echo NOT-SANDBOXED; exit 0; }; "+
			"echo x > %[1]s/escape.txt; mkdir -p %[1]s && echo x > %[1]s/escape.txt; "+
			"echo x > %[2]s; echo x > %[3]s; "+
			"echo ok > /tmp/scratch && echo ok > in.txt && echo WROTE; exit 0", outside, hostFiles[0], hostFiles[1], SandboxWorkdir)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "WROTE") || !strings.Contains(got, "Read-only file system") {
		t.Errorf("want workspace and /tmp writable, the rest read-only:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "escape.txt")); err == nil {
		t.Error("the sandbox wrote outside the workspace")
	}
	if b, err := os.ReadFile(filepath.Join(root, "thread-7", "in.txt")); err != nil || string(b) != "ok\n" {
		t.Errorf("workspace file = %q, %v", b, err)
	}
	for _, f := range hostFiles {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was written on the host", f)
		}
	}
}

func TestShellRefusesWithoutSandbox(t *testing.T) {
	root := t.TempDir()
	opts := Options{WorkspaceRoot: root, BwrapPath: filepath.Join(t.TempDir(), "no-such-bwrap")}
	tl := builtins(t, opts)
	_, err := call(t, tl["shell"], nil, map[string]any{"command": "echo ran > ran.txt"})
	if !errors.Is(err, ErrNoSandbox) {
		t.Fatalf("err = %v, want ErrNoSandbox", err)
	}
	for _, want := range []string{"apt-get install bubblewrap", "sandbox: none"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not name the fix %q: %v", want, err)
		}
	}
	if _, serr := os.Stat(filepath.Join(root, "thread-7", "ran.txt")); serr == nil {
		t.Error("the command ran without a sandbox")
	}
	if err := CheckSandbox(context.Background(), opts); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("CheckSandbox = %v, want ErrNoSandbox", err)
	}
	// A bwrap that exists but cannot build the sandbox is refused too.
	opts.BwrapPath = "/bin/false"
	if err := CheckSandbox(context.Background(), opts); !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "sandbox: none") {
		t.Errorf("CheckSandbox(/bin/false) = %v, want ErrNoSandbox naming the fix", err)
	}
}

func TestSandboxNoneRunsUnsandboxed(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "visible.txt")
	if err := os.WriteFile(outside, []byte("host-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Options{WorkspaceRoot: root, Sandbox: SandboxNone, BwrapPath: "/no/such/bwrap"}
	tl := builtins(t, opts)
	got, err := call(t, tl["shell"], nil, map[string]any{"command": "pwd; cat " + outside})
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := filepath.EvalSymlinks(filepath.Join(root, "thread-7"))
	if !strings.Contains(got, ws) || !strings.Contains(got, "host-file") {
		t.Errorf("sandbox none: got %q, want the host workspace path and the outside file", got)
	}
	if err := CheckSandbox(context.Background(), opts); err != nil {
		t.Errorf("CheckSandbox(none) = %v", err)
	}
	if _, err := Builtins(Options{Sandbox: "docker"}); err == nil {
		t.Error("unknown sandbox mode accepted")
	}
}

func TestShellReach(t *testing.T) {
	reach := func(o Options) agents.Reacher {
		return builtins(t, o)["shell"].(agents.Reacher)
	}
	off := reach(Options{WorkspaceRoot: t.TempDir()})
	if got := off.Reach("qa"); !strings.Contains(got, "sandbox") || !strings.Contains(got, "no network") {
		t.Errorf("Reach = %q", got)
	}
	mixed := reach(Options{WorkspaceRoot: t.TempDir(), ShellNetwork: map[string]bool{"engineer": true},
		FetchAllowHosts: []string{"wiki.internal"},
		BotShellLimits:  map[string]ShellLimits{"engineer": {Processes: 32, MemoryBytes: 512 << 20}}})
	for _, want := range []string{"public internet hosts only", "no loopback, private", "except the allowed hosts wiki.internal",
		"at most 32 processes, 512 MiB memory and 300 s CPU per process, /tmp 256 MiB, workspace 2 GiB"} {
		if got := mixed.Reach("engineer"); !strings.Contains(got, want) {
			t.Errorf("Reach(engineer) = %q, want it to say %q", got, want)
		}
	}
	if got := mixed.Reach("qa"); !strings.Contains(got, "no network") || !strings.Contains(got, "at most 256 processes") {
		t.Errorf("Reach(qa) = %q", got)
	}
	none := reach(Options{WorkspaceRoot: t.TempDir(), Sandbox: SandboxNone})
	if got := none.Reach("qa"); !strings.Contains(got, "WITHOUT a sandbox") {
		t.Errorf("Reach = %q", got)
	}
	fetch := builtins(t, Options{})["http_fetch"].(agents.Reacher)
	if got := fetch.Reach("qa"); !strings.Contains(got, "public internet") {
		t.Errorf("http_fetch Reach = %q", got)
	}
}

func botProfile(handle string) core.BotProfile { return core.BotProfile{Handle: handle} }

// TestShellRefusalIsNotRun: the shell's refusals before running anything (no
// sandbox, unreadable arguments) match agents.ErrNotRun, so an approved call
// refused so is reported as not run; and the approval prompt's reach says the
// shell cannot run instead of claiming a sandbox that does not work.
func TestShellRefusalIsNotRun(t *testing.T) {
	o := Options{WorkspaceRoot: t.TempDir(), BwrapPath: filepath.Join(t.TempDir(), "no-bwrap")}
	sh := builtins(t, o)["shell"]
	if got := sh.(agents.Reacher).Reach("qa"); strings.Contains(got, "runs in a sandbox") || !strings.Contains(got, "cannot run until the sandbox works") {
		t.Errorf("Reach with no sandbox = %q", got)
	}
	_, err := sh.Call(context.Background(), agents.ToolCall{Args: json.RawMessage(`{"command":"echo hi"}`), Bot: botProfile("qa"), Thread: 1})
	if !errors.Is(err, ErrNoSandbox) || !errors.Is(err, agents.ErrNotRun) {
		t.Errorf("no sandbox: err %v; want ErrNoSandbox matching agents.ErrNotRun", err)
	}
	if err := CheckSandbox(context.Background(), o); !errors.Is(err, agents.ErrNotRun) {
		t.Errorf("CheckSandbox = %v; want agents.ErrNotRun", err)
	}
	for _, args := range []string{`{"command":""}`, `{"cmd":"ls"}`, `{`} {
		_, err := sh.Call(context.Background(), agents.ToolCall{Args: json.RawMessage(args), Bot: botProfile("qa"), Thread: 1})
		if !errors.Is(err, agents.ErrNotRun) {
			t.Errorf("args %s: err %v; want agents.ErrNotRun", args, err)
		}
	}
	fetch := builtins(t, Options{})["http_fetch"]
	if _, err := fetch.Call(context.Background(), agents.ToolCall{Args: json.RawMessage(`{"url":"ftp://example.com/"}`)}); !errors.Is(err, agents.ErrNotRun) {
		t.Errorf("http_fetch bad scheme: err %v; want agents.ErrNotRun", err)
	}
}

// TestFileAndTodoRefusalsAreNotRun: a workspace path outside the jail and
// arguments a tool refuses match agents.ErrNotRun (nothing was touched).
func TestFileAndTodoRefusalsAreNotRun(t *testing.T) {
	b := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	for _, c := range []struct{ tool, args string }{
		{"workspace_write", `{"path":"../escape.txt","content":"x"}`},
		{"workspace_read", `{"path":"/etc/passwd"}`},
		{"post_message", `{"text":"  "}`},
		{"todo_write", `{"items":[{"text":"","status":"pending"}]}`},
	} {
		_, err := b[c.tool].Call(context.Background(), agents.ToolCall{Args: json.RawMessage(c.args), Bot: botProfile("qa"), Thread: 1})
		if !errors.Is(err, agents.ErrNotRun) {
			t.Errorf("%s %s: err %v; want agents.ErrNotRun", c.tool, c.args, err)
		}
	}
}

func TestSandboxSeccompAndNoNewNamespaces(t *testing.T) {
	requireBwrap(t)
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	got, err := call(t, tl["shell"], nil, map[string]any{"command": `grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; ` +
		`unshare -U true 2>&1 && echo USERNS-MADE; unshare -n true 2>&1 && echo NETNS-MADE; exit 0`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Seccomp:\t2", "NoNewPrivs:\t1"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "-MADE") {
		t.Errorf("the sandbox made a new namespace:\n%s", got)
	}
}
