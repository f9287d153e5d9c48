package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

const reloadToken = "reload-test-token-0123456789"

// reloadConfig writes a chat config with the given bots section.
func reloadConfig(t *testing.T, dir, bots string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	// A fixed port, kept across rewrites, so `openbot reload` finds the listener.
	listen := ""
	if old, err := os.ReadFile(path); err == nil {
		if m := regexp.MustCompile(`listen: "(\S+)"`).FindSubmatch(old); m != nil {
			listen = string(m[1])
		}
	}
	if listen == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listen = ln.Addr().String()
		ln.Close()
	}
	text := `
llm:
  default: {base_url: "${OPENAI_BASE_URL}", api_key: k, model: m}
store: {path: ` + filepath.Join(dir, "data", "openbot.db") + `}
workspace: ` + filepath.Join(dir, "ws") + `
http: {listen: "` + listen + `"}
admin: {token: ` + reloadToken + `}
bots:
` + bots
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tagOf returns the INSTR-* marker of the request's system prompt.
func tagOf(req openaitest.Request) string {
	for _, m := range req.Messages() {
		if m["role"] == "system" {
			if tag := regexp.MustCompile(`INSTR-[A-Z]+`).FindString(m["content"].(string)); tag != "" {
				return tag
			}
		}
	}
	return "no-tag"
}

// waitLog waits until the chat log file contains want and returns it.
func waitLog(t *testing.T, dir, want string) string {
	t.Helper()
	var log string
	waitUntil(t, "the log to say "+want, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "data", "openbot.log"))
		log = string(b)
		return strings.Contains(log, want)
	})
	return log
}

// TestReloadWhileRunInFlight: `openbot reload` (SIGHUP through the pid file) adds
// a bot and changes another's instructions while a run of the second is in
// flight: that run finishes with its old instructions, the next run uses the new
// ones, the added bot answers. A bad config is refused with every problem by
// `openbot reload`, by SIGHUP and by POST /admin/reload, and the old one keeps
// running.
func TestReloadWhileRunInFlight(t *testing.T) {
	llm := openaitest.New(t)
	inFlight := make(chan struct{})
	reloaded := make(chan struct{})
	var n atomic.Int32
	llm.Handle(func(req openaitest.Request) openaitest.Reply {
		if n.Add(1) == 1 {
			close(inFlight)
			<-reloaded // the reload happens while this run is in flight
			return openaitest.Calls(openaitest.Call("read_history", `{}`))
		}
		return openaitest.Text("answered under " + tagOf(req))
	})
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	dir := t.TempDir()
	path := reloadConfig(t, dir, "  - {handle: chief_of_staff, instructions: INSTR-OLD}\n")

	stdin, feed := io.Pipe()
	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"chat", "--config", path}, stdin, &out, &errb, envOf(env)) }()
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(feed, line+"\n"); err != nil {
			t.Fatalf("write %q: %v", line, err)
		}
	}

	say("first task")
	select {
	case <-inFlight:
	case <-ctx.Done():
		t.Fatalf("the first run never called the model; stderr:\n%s", errb.String())
	}
	reloadConfig(t, dir, "  - {handle: chief_of_staff, instructions: INSTR-NEW}\n  - {handle: designer, instructions: INSTR-DESIGNER}\n")
	r := runFor(t, []string{"reload", "--config", path}, strings.NewReader(""), env)
	if r.code != 0 {
		t.Fatalf("openbot reload exit %d: %s", r.code, r.stderr)
	}
	// With admin.token set, the command prints the server's report.
	if !strings.HasPrefix(r.stdout, "reloaded\n") || !strings.Contains(r.stdout, "designer") {
		t.Errorf("openbot reload printed no change list:\n%s", r.stdout)
	}
	waitLog(t, dir, "config reloaded")
	close(reloaded)
	say("second task")
	say("@designer a logo please")

	// A bad file: `openbot reload` refuses to send it and names every problem.
	reloadConfig(t, dir, "  - {handle: chief_of_staff, instructions: INSTR-BAD}\n  - {handle: chief_of_staff}\n  - {handle: Bad-Name}\n")
	r = runFor(t, []string{"reload", "--config", path}, strings.NewReader(""), env)
	if r.code != 1 || !strings.Contains(r.stderr, "bots[1].handle") || !strings.Contains(r.stderr, "bots[2].handle") {
		t.Fatalf("openbot reload of a bad file: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// The serve refuses it too, whether signalled directly or asked over HTTP.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logText := waitLog(t, dir, "config reload refused")
	addr := regexp.MustCompile(`"http listening" addr=(\S+)`).FindStringSubmatch(logText)
	if addr == nil {
		t.Fatalf("no listener address in the log:\n%s", logText)
	}
	post := func(token string) (int, string) {
		auth := ""
		if token != "" {
			auth = "Bearer " + token
		}
		return call(t, http.MethodPost, "http://"+addr[1]+"/admin/reload", auth, "")
	}
	if code, _ := post(""); code != http.StatusUnauthorized {
		t.Fatalf("POST /admin/reload without the token: %d", code)
	}
	code, body := post(reloadToken)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "bots[1].handle") || !strings.Contains(body, "bots[2].handle") {
		t.Fatalf("POST /admin/reload of a bad file: %d\n%s", code, body)
	}
	say("third task")
	feed.Close()

	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("chat exit %d; stderr:\n%s", code, errb.String())
		}
	case <-ctx.Done():
		t.Fatalf("chat did not end; stdout:\n%s", out.String())
	}
	want := "[chief_of_staff] answered under INSTR-OLD\n" +
		"[chief_of_staff] answered under INSTR-NEW\n" +
		"[designer] answered under INSTR-DESIGNER\n" +
		"[chief_of_staff] answered under INSTR-NEW\n"
	const notice = "[system] The configuration was not reloaded (details in openbot.log); the running one is kept.\n"
	got := out.String()
	if !strings.Contains(got, notice) {
		t.Errorf("the terminal was not told of the refused reload:\n%s", got)
	}
	if got = strings.ReplaceAll(got, notice, ""); got != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", got, want)
	}

	// Every reload is in the activity log with who asked for it: the admin
	// identity for `openbot reload` and POST /admin/reload, SIGHUP for the signal.
	reloadConfig(t, dir, "  - {handle: chief_of_staff, instructions: INSTR-NEW}\n")
	r = runFor(t, []string{"activity", "--kind", "config", "--config", path}, strings.NewReader(""), env)
	for _, line := range []string{"config reloaded by operator: applied bots", "config reload by SIGHUP refused", "config reload by operator refused"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("openbot activity --kind config lacks %q:\n%s%s", line, r.stdout, r.stderr)
		}
	}
}
