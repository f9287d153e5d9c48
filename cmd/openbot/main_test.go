package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/internal/runtest"
)

// lockedBuffer is a buffer safe for concurrent writers and readers.
type lockedBuffer = runtest.Buffer

func envOf(m map[string]string) config.LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// waitUntil calls cond until it holds, failing the test after 30 s. It is for
// what these tests read from outside, as an operator or a platform would:
// /healthz, the log file, /metrics, the console API and the CLI's answers,
// which offer no change event to wait on; so it polls (runtest.Poll).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	runtest.Poll(t, what, 30*time.Second, cond)
}

// exampleConfig writes config.example.yaml into dir with the store, workspace and
// listener moved into the test's directory and port 0, followed by each of more
// (YAML, appended as written), and returns its path.
func exampleConfig(t *testing.T, dir string, more ...string) string {
	t.Helper()
	data, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for old, repl := range map[string]string{
		"path: ./data/openbot.db":     "path: " + filepath.Join(dir, "data", "openbot.db"),
		"workspace: ./data/workspace": "workspace: " + filepath.Join(dir, "ws"),
		"listen: 127.0.0.1:8080":      "listen: 127.0.0.1:0",
		"run_timeout: 10m":            "run_timeout: 1m",
		"max_concurrent_runs: 4":      "max_concurrent_runs: 2",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("config.example.yaml no longer contains %q", old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	text += strings.Join(more, "")
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testConfig loads the config at path with env as the whole environment.
func testConfig(t *testing.T, path string, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// freeAddr is a loopback address whose port was free a moment ago, for a
// config that must name its listener before serve starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveWith runs serve over the example config plus extra YAML, with env and
// llm as the model provider, until the test ends; it returns the listener
// address and the log.
func serveWith(t *testing.T, llm *openaitest.Server, extra string, env map[string]string) (addr string, logs *lockedBuffer) {
	t.Helper()
	env["OPENAI_BASE_URL"] = llm.URL()
	addr, logs, _ = serveInProcess(t, testConfig(t, exampleConfig(t, t.TempDir(), extra), env), "serve")
	return addr, logs
}

// serveInProcess runs serve on cfg in this test process and waits until it
// listens; it returns the listener address, the log (serve's standard output
// and error), and stop, which ends serve and waits for it (runtest.Start's
// stop: also run when the test ends; a second call does nothing). A non-zero
// exit is a test error; name labels serve in messages. Each hook changes the
// app before serve starts (onEngine, configPath, ...).
func serveInProcess(t *testing.T, cfg *config.Config, name string, hooks ...func(*app)) (addr string, logs *lockedBuffer, stop func()) {
	t.Helper()
	logs = &lockedBuffer{}
	addrs := make(chan string, 1)
	a := &app{cfg: cfg, stdin: strings.NewReader(""), stdout: logs, stderr: logs,
		log: testLogger(logs), onListen: func(addr string) { addrs <- addr }}
	for _, h := range hooks {
		h(a)
	}
	exited := make(chan int, 1)
	_, stop = runtest.Start(t, func(ctx context.Context) error {
		code := a.serve(ctx)
		exited <- code
		if code != 0 {
			return fmt.Errorf("%s exit %d:\n%s", name, code, logs.String())
		}
		return nil
	})
	select {
	case addr = <-addrs:
		return addr, logs, stop
	case code := <-exited:
		t.Fatalf("%s exited %d early:\n%s", name, code, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never listened", name)
	}
	return "", logs, stop
}

type result struct {
	code           int
	stdout, stderr string
}

// runFor runs the program with a deadline so a hang fails the test instead of the suite.
func runFor(t *testing.T, args []string, stdin io.Reader, env map[string]string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb lockedBuffer
	code := run(ctx, args, stdin, &out, &errb, envOf(env))
	if ctx.Err() != nil {
		t.Fatalf("run %v did not finish before its deadline; stdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
	}
	return result{code, out.String(), errb.String()}
}

func TestChatPipedHello(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("Hello! How can the team help?"))
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)

	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("hello\n"),
		map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "[chief_of_staff] Hello! How can the team help?\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	reqs := llm.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model got %d requests, want 1", len(reqs))
	}
	if got := openaitest.LastUserText(reqs[0]); !strings.Contains(got, "hello") {
		t.Errorf("last user text = %q, want it to carry %q", got, "hello")
	}
	if reqs[0].Body.Model != "gpt-4o-mini" {
		t.Errorf("model = %q, want the example default gpt-4o-mini", reqs[0].Body.Model)
	}
	logData, err := os.ReadFile(filepath.Join(dir, "data", "openbot.log"))
	if err != nil {
		t.Fatalf("chat log file: %v", err)
	}
	if !strings.Contains(string(logData), "stopped") {
		t.Errorf("log file lacks the clean stop:\n%s", logData)
	}
	if r.stderr != "" {
		t.Errorf("stderr in chat mode = %q, want nothing (logs go to the file)", r.stderr)
	}
}

func TestChatHandoffThroughTheTeam(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(
		openaitest.Text("@engineer please add a README. Report back to @chief_of_staff."),
		openaitest.Text("Done: README.md added. @chief_of_staff"),
		openaitest.Text("The README is in place."),
	)
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("we need a README\n"),
		map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-test"})
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	want := "[chief_of_staff] @engineer please add a README. Report back to @chief_of_staff.\n" +
		"[engineer] Done: README.md added. @chief_of_staff\n" +
		"[chief_of_staff] The README is in place.\n"
	if r.stdout != want {
		t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, want)
	}
	reqs := llm.Requests()
	// The fourth is the engineer's reflection (memory: true in the example),
	// flushed at shutdown.
	if len(reqs) != 4 || !strings.HasPrefix(reqs[3].Body.Messages[0].Content, "You maintain the long-term memory of @engineer") {
		t.Fatalf("model got %d requests, want 3 and the engineer's reflection", len(reqs))
	}
	if auth := reqs[0].Header.Get("Authorization"); auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q", auth)
	}
	logData, _ := os.ReadFile(filepath.Join(dir, "data", "openbot.log"))
	if strings.Contains(string(logData), "sk-test") {
		t.Error("the API key appears in the log")
	}
}

func TestChatRestartKeepsThreads(t *testing.T) {
	llm := openaitest.New(t)
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("first\n"), env); r.code != 0 {
		t.Fatalf("first run exit %d: %s", r.code, r.stderr)
	}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("/threads\n"), env)
	if r.code != 0 {
		t.Fatalf("second run exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "#1  first") {
		t.Errorf("second run does not list the first thread:\n%s", r.stdout)
	}
}

func TestMissingKeyFailsFast(t *testing.T) {
	cfg := exampleConfig(t, t.TempDir())
	want := `openbot: llm profile "default" has no api_key for https://api.openai.com/v1: set OPENAI_API_KEY, or OPENAI_BASE_URL=http://localhost:11434/v1 for a local Ollama (which needs no key).` + "\n"
	for _, cmd := range []string{"chat", "serve"} {
		t.Run(cmd, func(t *testing.T) {
			r := runFor(t, []string{cmd, "--config", cfg}, strings.NewReader("hello\n"), nil)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			if r.stderr != want {
				t.Errorf("stderr = %q\nwant     %q", r.stderr, want)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
bots:
  - handle: chief_of_staff
  - handle: engineer
  - handle: engineer
    colour: red
default_bot: boss
limits: {run_timeout: -5s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"config", "check", "--config", bad}, nil, nil)
	if r.code == 0 {
		t.Fatalf("config check on a bad file exited 0")
	}
	for _, want := range []string{
		"4 problem(s)",
		`bots[2].colour: unknown key "colour" (line 8)`,
		`limits.run_timeout: must be positive, got -5s`,
		`bots[2].handle: "engineer" is used twice`,
		`default_bot: "boss" is not a configured bot`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "config ok") {
		t.Error("bad config printed config ok")
	}

	good := exampleConfig(t, dir)
	r = runFor(t, []string{"config", "check", "--config", good}, nil, map[string]string{"OPENAI_API_KEY": "k"})
	if r.code != 0 || r.stdout != "config ok\n" || r.stderr != "" {
		t.Errorf("good config: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// The example's own header says to check it; without a key that is a warning.
	r = runFor(t, []string{"config", "check", "--config", good}, nil, nil)
	if r.code != 0 || r.stdout != "config ok\n" || !strings.Contains(r.stderr, "warning: llm.default.api_key: ") || !strings.Contains(r.stderr, "OPENAI_API_KEY") {
		t.Errorf("keyless config: exit %d stdout %q stderr %q, want 0 with a warning naming OPENAI_API_KEY", r.code, r.stdout, r.stderr)
	}
	r = runFor(t, []string{"config", "check", "--config", filepath.Join(dir, "missing.yaml")}, nil, nil)
	if r.code != 1 || !strings.Contains(r.stderr, "missing.yaml") {
		t.Errorf("missing file: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestUsageAndVersion(t *testing.T) {
	tests := []struct {
		args      []string
		code      int
		outSubstr string
	}{
		{[]string{"version"}, 0, "openbot " + Version},
		{[]string{"help"}, 0, "usage:"},
		{nil, 2, ""},
		{[]string{"frobnicate"}, 2, ""},
		{[]string{"config"}, 2, ""},
		{[]string{"serve", "--nope"}, 2, ""},
		{[]string{"serve", "--log-level", "loud"}, 2, ""},
	}
	for _, tt := range tests {
		r := runFor(t, tt.args, nil, nil)
		if r.code != tt.code || !strings.Contains(r.stdout, tt.outSubstr) {
			t.Errorf("run %q: exit %d stdout %q stderr %q, want exit %d with %q", tt.args, r.code, r.stdout, r.stderr, tt.code, tt.outSubstr)
		}
	}
}

// TestHelpAndStrayArguments: --help and `help COMMAND` show the command's help
// on stdout and exit 0; an argument a command does not take, an unknown subcommand and an
// unknown command in help are refused with exit 2, naming what was wrong.
func TestHelpAndStrayArguments(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stream string // "out" or "err": where want is printed
		want   string
	}{
		{[]string{"chat", "--help"}, 0, "out", "-config"},
		{[]string{"serve", "-h"}, 0, "out", "-log-level"},
		{[]string{"bench", "--help"}, 2, "err", "the benchmarks are not part of the openbot binary"},
		{[]string{"threads", "--help"}, 0, "out", "-limit"},
		{[]string{"help", "chat"}, 0, "out", "-config"},
		{[]string{"help", "config", "check"}, 0, "out", "-config"},
		{[]string{"help", "store"}, 0, "out", "openbot store compact"},
		{[]string{"help", "memory"}, 0, "out", "usage:"},
		{[]string{"config", "--help"}, 0, "out", "config check"},
		{[]string{"help", "bogus"}, 2, "err", `unknown command "bogus"`},
		{[]string{"help", "serve", "--config"}, 0, "out", "-log-level"},
		{[]string{"help", "memory", "edit", "1", "--bot", "engineer", "--text"}, 0, "out", "-text"},
		{[]string{"runs", "12"}, 2, "err", `openbot runs: unexpected argument "12"`},
		{[]string{"config", "bogus"}, 2, "err", `unknown subcommand "bogus"`},
		{[]string{"chat", "config.example.yaml"}, 2, "err", `unexpected argument "config.example.yaml" (give a config file as --config config.example.yaml)`},
		{[]string{"serve", "--config", "x.yaml", "extra"}, 2, "err", `openbot serve: unexpected argument "extra"`},
		{[]string{"doctor", "now"}, 2, "err", `openbot doctor: unexpected argument "now"`},
		{[]string{"store", "compact", "x"}, 2, "err", `openbot store compact: unexpected argument "x"`},
		{[]string{"bench", "--platform", "slack"}, 2, "err", "go test ./cmd/openbot -run '^$' -bench"},
	}
	for _, tt := range tests {
		r := runFor(t, tt.args, nil, nil)
		got := r.stdout
		if tt.stream == "err" {
			got = r.stderr
		}
		if r.code != tt.code || !strings.Contains(got, tt.want) {
			t.Errorf("run %q: exit %d stdout %q stderr %q, want exit %d and %q on std%s", tt.args, r.code, r.stdout, r.stderr, tt.code, tt.want, tt.stream)
		}
	}
}

func TestServeHealthzAndShutdown(t *testing.T) {
	llm := openaitest.New(t)
	dir := t.TempDir()
	path := exampleConfig(t, dir, "\nslack:\n  - {name: acme, bot: \"*\"}\n")
	cfg := testConfig(t, path, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	addr, logs, stop := serveInProcess(t, cfg, "serve")
	var body string
	waitUntil(t, "/healthz 200", func() bool {
		var code int
		code, body = healthz(t, addr)
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Fatalf("healthz status %d", code)
		}
		return code == http.StatusOK
	})
	for _, want := range []string{"ok\n", "slack/acme: skipped: ", "console/local: skipped: "} {
		if !strings.Contains(body, want) {
			t.Errorf("healthz body lacks %q:\n%s", want, body)
		}
	}
	stop()
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
}

func TestChatNeedsAConsole(t *testing.T) {
	llm := openaitest.New(t)
	path := exampleConfig(t, t.TempDir())
	data, _ := os.ReadFile(path)
	text := strings.Replace(string(data), "enabled: true ", "enabled: false", 1)
	if text == string(data) {
		t.Fatal("example has no `enabled: true` to flip")
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"chat", "--config", path}, strings.NewReader("hi\n"), map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 1 || !strings.Contains(r.stderr, "chat needs an enabled console account") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestConfigCheckToolNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte(`
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
workspace: `+filepath.Join(dir, "ws")+`
mcp_servers:
  - {name: fs, command: "true"}
bots:
  - handle: engineer
    tools: [workspace_read, read_history, fs, fs__read_file, "fs__*", shel, git__log]
    approval_tools: [shell, nope]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"config", "check", "--config", path}, nil, nil)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	want := `3 problem(s):
  bots[0].tools[5]: unknown tool "shel" (not a built-in, and no mcp_servers entry named "shel")
  bots[0].tools[6]: unknown tool "git__log" (not a built-in, and no mcp_servers entry named "git")
  bots[0].approval_tools[1]: unknown tool "nope" (not a built-in, and no mcp_servers entry named "nope")
`
	if !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr =\n%s\nwant suffix\n%s", r.stderr, want)
	}
}

// TestChatPipedExitsNonZeroWhenARunFailed: a script piping into chat can tell a
// failed run from the exit code, and stderr says which run failed and why; the
// notice is in the conversation as always.
func TestChatPipedExitsNonZeroWhenARunFailed(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Error(400, "model gpt-x does not exist"), openaitest.Text("fine"))
	cfg := exampleConfig(t, t.TempDir())
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("hello\n"), env)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"openbot: chat: 1 run(s) failed in this chat:", "@chief_of_staff (run 1, thread #1):", "gpt-x does not exist"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "could not finish") {
		t.Errorf("stdout lacks the failure notice:\n%s", r.stdout)
	}
	// A session whose runs all succeed exits 0 as before.
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("again\n"), env); r.code != 0 {
		t.Fatalf("clean session exit %d; stderr %q", r.code, r.stderr)
	}
}

// TestChatPipedExitsNonZeroWhenABudgetRefused: a run refused before it starts,
// because its bot's budget is spent, fails the piped session as a failed run does.
func TestChatPipedExitsNonZeroWhenABudgetRefused(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("first"), openaitest.Text("second"))
	cfg := exampleConfig(t, t.TempDir())
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := "        daily: {cost: 5.00, tokens: 2000000}     # per UTC day"
	if !strings.Contains(string(data), old) {
		t.Fatalf("config.example.yaml no longer contains %q", old)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), old, "        daily: {tokens: 1}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("hello\nand again\n"), env)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"openbot: chat: 1 run(s) failed in this chat:", "(run 2, thread #", "budget"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
