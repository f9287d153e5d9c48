package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// loginFrom posts the login form to d as if from remote ("host:port") with the
// given extra headers, and returns the recorded answer.
func loginFrom(d *Dashboard, remote, token string, hdr map[string]string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	d.Mount(mux)
	req := httptest.NewRequest("POST", "http://openbot.example/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.RemoteAddr = remote
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	return w
}

// TestLoginThrottlePerClient: MaxFailedLogins wrong tokens from one address
// lock out that address only; the admin's right token from another address
// still signs in. X-Forwarded-For does not pick the bucket. Past
// MaxFailedLoginsTotal wrong tokens from everyone, every login waits.
func TestLoginThrottlePerClient(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	d := New(Options{Token: testToken, Now: func() time.Time { return now }})
	for i := 0; i < MaxFailedLogins; i++ {
		if w := loginFrom(d, "203.0.113.7:4000", "wrong", map[string]string{"X-Forwarded-For": "198.51.100.1"}); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d = %d, want 401", i, w.Code)
		}
	}
	if w := loginFrom(d, "203.0.113.7:4001", "wrong", nil); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the guessing address past the limit = %d, want 429", w.Code)
	}
	if w := loginFrom(d, "203.0.113.7:4002", testToken, map[string]string{"X-Forwarded-For": "198.51.100.1"}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the guessing address with a forged X-Forwarded-For = %d, want 429", w.Code)
	}
	if w := loginFrom(d, "198.51.100.1:5000", testToken, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("the admin from another address = %d, want 303", w.Code)
	}

	// The global ceiling: many addresses together.
	d = New(Options{Token: testToken, Now: func() time.Time { return now }})
	for i := 0; i < MaxFailedLoginsTotal; i++ {
		loginFrom(d, "192.0.2."+strings.Repeat("1", 1+i%3)+":1", "wrong", nil)
		d.fails.clients = nil // forget the addresses; only the total counts
	}
	if w := loginFrom(d, "198.51.100.1:5000", testToken, nil); w.Code != http.StatusTooManyRequests {
		t.Fatalf("login past the global ceiling = %d, want 429", w.Code)
	}
}

// TestSecureCookieBehindProxy: the session cookie is Secure over TLS, behind a
// proxy that sends "X-Forwarded-Proto: https", and always with SecureCookie;
// plain HTTP without either leaves it off (a local dashboard still works).
func TestSecureCookieBehindProxy(t *testing.T) {
	cases := []struct {
		name   string
		opts   Options
		hdr    map[string]string
		secure bool
	}{
		{"plain", Options{Token: testToken}, nil, false},
		{"forwarded https", Options{Token: testToken}, map[string]string{"X-Forwarded-Proto": "https"}, true},
		{"forwarded http", Options{Token: testToken}, map[string]string{"X-Forwarded-Proto": "http"}, false},
		{"forced", Options{Token: testToken, SecureCookie: true}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := loginFrom(New(tc.opts), "127.0.0.1:1", testToken, tc.hdr)
			cs := w.Result().Cookies()
			if w.Code != http.StatusSeeOther || len(cs) != 1 {
				t.Fatalf("login = %d %v", w.Code, cs)
			}
			if cs[0].Secure != tc.secure {
				t.Fatalf("cookie Secure = %v, want %v", cs[0].Secure, tc.secure)
			}
		})
	}
}
