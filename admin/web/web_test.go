package web

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "adm-s3cret-token-value"

// rig serves a Dashboard the way cmd/openbot mounts it: the routes on a mux
// and /api/v1/ behind Guard, with a fake API that records what reached it and
// a bearer guard that refuses everything.
type rig struct {
	d    *Dashboard
	srv  *httptest.Server
	mu   sync.Mutex
	hits []string
}

func newRig(t *testing.T, opts Options, tls bool) *rig {
	t.Helper()
	rg := &rig{d: New(opts)}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.mu.Lock()
		rg.hits = append(rg.hits, r.Method+" "+r.URL.Path)
		rg.mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	})
	bearer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+opts.Token && opts.Token != "" {
			api.ServeHTTP(w, r)
			return
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux := http.NewServeMux()
	rg.d.Mount(mux)
	mux.Handle("/api/v1/", rg.d.Guard(bearer, api))
	mux.Handle("/", http.NotFoundHandler()) // the webhooks' catch-all
	if tls {
		rg.srv = httptest.NewTLSServer(mux)
	} else {
		rg.srv = httptest.NewServer(mux)
	}
	t.Cleanup(rg.srv.Close)
	return rg
}

// client returns a client with a cookie jar that does not follow redirects.
func (rg *rig) client() *http.Client {
	c := *rg.srv.Client() // a copy: each client has its own jar
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func do(t *testing.T, c *http.Client, method, url string, body io.Reader, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func login(t *testing.T, rg *rig, c *http.Client, token string) *http.Response {
	t.Helper()
	resp, _ := do(t, c, "POST", rg.srv.URL+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	return resp
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrfOf signs c in and returns the CSRF token of its session from the page.
func csrfOf(t *testing.T, rg *rig, c *http.Client) string {
	t.Helper()
	if resp := login(t, rg, c, testToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d", resp.StatusCode)
	}
	_, page := do(t, c, "GET", rg.srv.URL+"/", nil, nil)
	m := csrfMeta.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf meta in the app page:\n%s", page)
	}
	return m[1]
}

// TestLoginCookie: the right token sets an HttpOnly, SameSite=Strict session
// cookie for Path=/ (Secure over TLS only) and the cookie opens the app page
// and the API; a wrong token gets the form again with 401 and no cookie.
func TestLoginCookie(t *testing.T) {
	for _, tls := range []bool{false, true} {
		rg := newRig(t, Options{Token: testToken}, tls)
		c := rg.client()
		_, page := do(t, c, "GET", rg.srv.URL+"/", nil, nil)
		if !strings.Contains(page, `action="/login"`) {
			t.Fatalf("GET / without a session is not the login form:\n%s", page)
		}
		if resp, _ := do(t, c, "GET", rg.srv.URL+"/api/v1/bots", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("API without a session = %d, want 401", resp.StatusCode)
		}
		resp := login(t, rg, c, "wrong")
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		resp = login(t, rg, c, testToken)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Fatalf("login = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		raw := resp.Header.Get("Set-Cookie")
		ck := resp.Cookies()
		if len(ck) != 1 || ck[0].Name != CookieName || len(ck[0].Value) < 40 {
			t.Fatalf("cookies = %v", ck)
		}
		if !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/" || ck[0].Secure != tls || ck[0].MaxAge <= 0 {
			t.Errorf("tls=%v: cookie flags: %s", tls, raw)
		}
		_, page = do(t, c, "GET", rg.srv.URL+"/", nil, nil)
		if !csrfMeta.MatchString(page) || !strings.Contains(page, "/ui/app.js") {
			t.Fatalf("GET / with a session is not the app:\n%s", page)
		}
		if resp, _ := do(t, c, "GET", rg.srv.URL+"/api/v1/bots", nil, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("API with the session cookie = %d", resp.StatusCode)
		}
		// A forged cookie opens nothing.
		other := rg.client()
		u, _ := url.Parse(rg.srv.URL)
		other.Jar.SetCookies(u, []*http.Cookie{{Name: CookieName, Value: strings.Repeat("A", 43)}})
		if resp, _ := do(t, other, "GET", rg.srv.URL+"/api/v1/bots", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("forged cookie: API = %d, want 401", resp.StatusCode)
		}
	}
}

// TestCSRF: with the session cookie a state-changing API call needs the
// session's CSRF token in X-CSRF-Token (missing or wrong: 403, the API is not
// reached); a cross-site login is refused; logout needs the token too.
func TestCSRF(t *testing.T) {
	rg := newRig(t, Options{Token: testToken}, false)
	c := rg.client()
	tok := csrfOf(t, rg, c)
	answer := rg.srv.URL + "/api/v1/questions/1/answer"
	for _, hdr := range []map[string]string{nil, {CSRFHeader: "wrong"}, {CSRFHeader: tok + "x"}} {
		if resp, _ := do(t, c, "POST", answer, strings.NewReader(`{"decision":"approve"}`), hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST with %v = %d, want 403", hdr, resp.StatusCode)
		}
	}
	if len(rg.hits) != 0 {
		t.Fatalf("refused requests reached the API: %v", rg.hits)
	}
	// Another session's token is not this session's.
	c2 := rg.client()
	tok2 := csrfOf(t, rg, c2)
	if resp, _ := do(t, c, "POST", answer, strings.NewReader(`{}`), map[string]string{CSRFHeader: tok2}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with another session's token = %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, c, "POST", answer, strings.NewReader(`{}`), map[string]string{CSRFHeader: tok}); resp.StatusCode != http.StatusOK {
		t.Errorf("POST with the token = %d, want 200", resp.StatusCode)
	}
	if len(rg.hits) != 1 || rg.hits[0] != "POST /api/v1/questions/1/answer" {
		t.Errorf("API hits = %v", rg.hits)
	}
	// Cross-site login attempts.
	for _, hdr := range []map[string]string{{"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}} {
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
		resp, _ := do(t, rg.client(), "POST", rg.srv.URL+"/login", strings.NewReader("token="+testToken), hdr)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("cross-site login %v = %d %v", hdr, resp.StatusCode, resp.Cookies())
		}
	}
	// Logout: refused without the token, then done with it.
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if resp, _ := do(t, c, "POST", rg.srv.URL+"/logout", strings.NewReader(""), form); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without token = %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, c, "POST", rg.srv.URL+"/logout", strings.NewReader("csrf="+url.QueryEscape(tok)), form); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout = %d, want 303", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", rg.srv.URL+"/api/v1/bots", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API after logout = %d, want 401", resp.StatusCode)
	}
}

// TestOffWithoutToken: with no admin token every dashboard route answers 404
// and Guard is the bearer guard alone.
func TestOffWithoutToken(t *testing.T) {
	rg := newRig(t, Options{}, false)
	c := rg.client()
	for _, r := range []struct{ method, path string }{{"GET", "/"}, {"POST", "/login"}, {"POST", "/logout"}, {"GET", "/ui/app.js"}, {"GET", "/ui/app.css"}} {
		if resp, _ := do(t, c, r.method, rg.srv.URL+r.path, strings.NewReader("token="), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s = %d, want 404", r.method, r.path, resp.StatusCode)
		}
	}
	if resp := login(t, rg, c, ""); resp.StatusCode != http.StatusNotFound || len(resp.Cookies()) != 0 {
		t.Errorf("login with the empty token = %d %v", resp.StatusCode, resp.Cookies())
	}
}

// TestNothingSecret: no page or asset the dashboard serves holds the admin
// token or the session id (HttpOnly: the page never needs it); every answer
// forbids framing and foreign scripts.
func TestNothingSecret(t *testing.T) {
	rg := newRig(t, Options{Token: testToken}, false)
	c := rg.client()
	_, loginPage := do(t, c, "GET", rg.srv.URL+"/", nil, nil)
	resp := login(t, rg, c, testToken)
	sid := resp.Cookies()[0].Value
	_, wrong := do(t, rg.client(), "POST", rg.srv.URL+"/login", strings.NewReader("token="+testToken+"x"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	pages := map[string]string{"login": loginPage, "wrong login": wrong}
	for _, p := range []string{"/", "/ui/app.js", "/ui/app.css"} {
		r, body := do(t, c, "GET", rg.srv.URL+p, nil, nil)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", p, r.StatusCode)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		pages[p] = body
	}
	for name, body := range pages {
		if strings.Contains(body, testToken) || strings.Contains(body, sid) {
			t.Errorf("%s holds the admin token or the session id", name)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s loads something from another origin", name)
		}
	}
	for _, p := range []string{"/ui/app.html", "/ui/login.html", "/ui/"} {
		if r, _ := do(t, c, "GET", rg.srv.URL+p, nil, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404 (raw pages and listings are not served)", p, r.StatusCode)
		}
	}
}

// TestSessionsBounded: sessions expire, and past MaxSessions a login drops
// the session that expires first.
func TestSessionsBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ss := newSessions(2, time.Hour, clock)
	a, _ := ss.create()
	advance(time.Minute)
	b, _ := ss.create()
	advance(time.Minute)
	cc, _ := ss.create()
	if _, ok := ss.get(a); ok || ss.len() != 2 {
		t.Fatalf("oldest session kept past the bound (len %d)", ss.len())
	}
	if _, ok := ss.get(b); !ok {
		t.Fatal("second session dropped")
	}
	advance(59 * time.Minute)
	if _, ok := ss.get(b); ok {
		t.Error("expired session accepted")
	}
	if _, ok := ss.get(cc); !ok {
		t.Error("live session refused")
	}
	if _, ok := ss.get(""); ok {
		t.Error("empty id accepted")
	}
}

// TestLoginThrottle: past MaxFailedLogins wrong tokens in a minute every login
// answers 429, the right token too, until the minute is over.
func TestLoginThrottle(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rg := newRig(t, Options{Token: testToken, Now: clock}, false)
	for i := 0; i < MaxFailedLogins; i++ {
		if resp := login(t, rg, rg.client(), "wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d = %d, want 401", i, resp.StatusCode)
		}
	}
	if resp := login(t, rg, rg.client(), testToken); resp.StatusCode != http.StatusTooManyRequests || len(resp.Cookies()) != 0 {
		t.Fatalf("login past the limit = %d %v, want 429", resp.StatusCode, resp.Cookies())
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if resp := login(t, rg, rg.client(), testToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login a minute later = %d, want 303", resp.StatusCode)
	}
}

// len is the number of sessions kept.
func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}
