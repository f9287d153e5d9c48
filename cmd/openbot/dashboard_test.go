package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestServeDashboard: serve mounts the web dashboard at / of the shared
// listener: the sign-in form, a login with admin.token that opens the app and,
// through its cookie, /api/v1 (a POST needs the CSRF token), while other paths
// still reach the webhook routes; without admin.token, / answers 404.
func TestServeDashboard(t *testing.T) {
	llm := openaitest.New(t)
	_, addr, logs, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken})
	defer stop()
	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, `action="/login"`) {
		t.Fatalf("GET / = %d %q, want the sign-in form", code, body)
	}
	if code, _ := get("/api/v1/bots"); code != http.StatusUnauthorized {
		t.Errorf("API without a session = %d", code)
	}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {testAdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("login = %d, no app page:\n%s", resp.StatusCode, page)
	}
	if code, body := get("/api/v1/bots"); code != http.StatusOK || !strings.Contains(body, `"handle"`) {
		t.Errorf("API with the session = %d %q", code, body)
	}
	post := func(csrf string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/questions/1/answer", strings.NewReader(`{"decision":"approve"}`))
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(""); code != http.StatusForbidden || !strings.Contains(body, "X-CSRF-Token") {
		t.Errorf("POST without the CSRF token = %d %q, want 403", code, body)
	}
	// The API itself answers (JSON; the example config has no admin.identity).
	if code, body := post(string(m[1])); code == http.StatusUnauthorized || !strings.HasPrefix(body, `{"error"`) || strings.Contains(body, "CSRF") {
		t.Errorf("POST with the CSRF token = %d %q, want the API's own answer", code, body)
	}
	if code, _ := get("/no/such/webhook"); code != http.StatusNotFound {
		t.Errorf("unknown path = %d, want 404 from the webhook routes", code)
	}
	if strings.Contains(string(page), testAdminToken) || strings.Contains(logs.String(), testAdminToken) {
		t.Error("the admin token is in the page or the log")
	}
}

// TestServeDashboardOff: without admin.token the dashboard is off: / and
// /login answer 404.
func TestServeDashboardOff(t *testing.T) {
	llm := openaitest.New(t)
	_, addr, _, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	defer stop()
	for _, p := range []string{"/", "/ui/app.js"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	resp, err := http.PostForm("http://"+addr+"/login", url.Values{"token": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || len(resp.Cookies()) != 0 {
		t.Errorf("POST /login = %d %v, want 404", resp.StatusCode, resp.Cookies())
	}
}
