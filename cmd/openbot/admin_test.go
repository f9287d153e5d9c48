package main

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/internal/runtest"
)

const testAdminToken = "admin-token-0123456789abcdef"

// serveOnFreePort writes the example config listening on a free loopback port,
// runs serve with env until /healthz is ready, and returns the config path, the
// listener address, the log, and a stop function that waits for a clean exit.
// Each edit changes the loaded config before serve starts (a reload reads the
// file again, without them).
func serveOnFreePort(t *testing.T, env map[string]string, edit ...func(*config.Config)) (path, addr string, logs *lockedBuffer, stop func()) {
	t.Helper()
	addr = freeAddr(t)
	path = exampleConfig(t, t.TempDir())
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "listen: 127.0.0.1:0", "listen: "+addr, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, path, env)
	for _, e := range edit {
		e(cfg)
	}
	_, logs, stop = serveInProcess(t, cfg, "serve", func(a *app) { a.configPath, a.lookupEnv = path, envOf(env) })
	waitUntil(t, "serve to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return path, addr, logs, stop
}

func getApprovals(t *testing.T, addr, auth string) (int, string) {
	t.Helper()
	return call(t, http.MethodGet, "http://"+addr+"/approvals", auth, "")
}

// call sends an HTTP request with body and an Authorization header (none when
// auth is "") and returns the status and the body of the answer.
func call(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return runtest.Do(t, req)
}

// TestServeAdminToken: with admin.token set, /approvals answers only the bearer
// token (a loopback request without it is refused with no detail), and `openbot
// approvals list` reads the audit through the listener with the config's token
// while serve holds the store; without the token it says what to set.
func TestServeAdminToken(t *testing.T) {
	llm := openaitest.New(t)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}
	path, addr, logs, stop := serveOnFreePort(t, env)
	defer stop()

	if code, body := getApprovals(t, addr, ""); code != http.StatusUnauthorized || body != "unauthorized\n" {
		t.Errorf("loopback without token: %d %q", code, body)
	}
	if code, body := getApprovals(t, addr, "Bearer wrong-token-0123456789abcdef"); code != http.StatusUnauthorized || body != "unauthorized\n" {
		t.Errorf("wrong token: %d %q", code, body)
	}
	if code, body := getApprovals(t, addr, "Bearer "+testAdminToken); code != http.StatusOK || !strings.Contains(body, `"questions":[]`) {
		t.Errorf("right token: %d %q", code, body)
	}

	r := runFor(t, []string{"approvals", "list", "--config", path}, nil, env)
	if r.code != 0 || !strings.Contains(r.stdout, "no questions") {
		t.Errorf("approvals list through the listener: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	noToken := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r = runFor(t, []string{"approvals", "list", "--config", path}, nil, noToken)
	if r.code == 0 || !strings.Contains(r.stderr, "admin.token") {
		t.Errorf("approvals list without a token: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(logs.String(), testAdminToken) {
		t.Errorf("the admin token is in the log:\n%s", logs.String())
	}
	// The log says where the dashboard is, and does not warn about the
	// terminal account, which serve never runs.
	if !strings.Contains(logs.String(), "url=http://"+addr+"/") {
		t.Errorf("serve did not log the dashboard URL http://%s/:\n%s", addr, logs.String())
	}
	if strings.Contains(logs.String(), "account skipped") {
		t.Errorf("serve warned about a skipped account:\n%s", logs.String())
	}
}

// TestServeAdminOff: without admin.token the admin endpoints answer 404, even
// with a token and from loopback, and serve says at start that they are off.
func TestServeAdminOff(t *testing.T) {
	llm := openaitest.New(t)
	_, addr, logs, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	defer stop()
	for _, auth := range []string{"", "Bearer " + testAdminToken} {
		if code, body := getApprovals(t, addr, auth); code != http.StatusNotFound || strings.Contains(body, "question") {
			t.Errorf("auth %q: %d %q, want 404 revealing nothing", auth, code, body)
		}
	}
	if !strings.Contains(logs.String(), "admin endpoints are off") {
		t.Errorf("serve did not say the admin endpoints are off:\n%s", logs.String())
	}
}

// TestChatModelFailureRedacted: a base_url with user:password and an api-key
// query, and a model that fails: the secrets are in no log line and not on the
// terminal, and the notice shows no internal address.
func TestChatModelFailureRedacted(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Error(http.StatusUnauthorized, "invalid credentials")
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	base := strings.Replace(llm.URL(), "http://", "http://alice:hunter2pass@", 1) + "?api-key=SECRETKEY123"
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("hello\n"), map[string]string{"OPENAI_BASE_URL": base})
	logData, err := os.ReadFile(dir + "/data/openbot.log")
	if err != nil {
		t.Fatal(err)
	}
	all := r.stdout + r.stderr + string(logData)
	for _, secret := range []string{"SECRETKEY123", "hunter2pass"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q leaked:\nstdout %s\nstderr %s\nlog %s", secret, r.stdout, r.stderr, logData)
		}
	}
	if !strings.Contains(r.stdout, "HTTP 401") || strings.Contains(r.stdout, "127.0.0.1") {
		t.Errorf("notice = %q, want the status in words and no address", r.stdout)
	}
	if !strings.Contains(string(logData), "base_url=") {
		t.Errorf("the start log lacks the profile line:\n%s", logData)
	}
	if n := len(llm.Requests()); n != 1 || llm.Requests()[0].Path != "/v1/chat/completions" {
		t.Errorf("requests = %d (%+v)", n, llm.Requests())
	}
}

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8080": "127.0.0.1:8080", "0.0.0.0:8080": "127.0.0.1:8080", "[::]:9": "127.0.0.1:9",
		"127.0.0.1:8080": "127.0.0.1:8080", "bot.example:80": "bot.example:80", "[::1]:7": "[::1]:7",
	} {
		if got := dialAddr(in); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
