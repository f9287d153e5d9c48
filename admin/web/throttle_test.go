package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
// still signs in. X-Forwarded-For does not pick the bucket. An IPv6 client is
// its /64. After a minute the address may try again.
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
	for i := 0; i < MaxFailedLogins; i++ {
		loginFrom(d, "[2001:db8:1:2::"+strconv.Itoa(i+1)+"]:1", "wrong", nil)
	}
	if w := loginFrom(d, "[2001:db8:1:2:ffff::9]:1", testToken, nil); w.Code != http.StatusTooManyRequests {
		t.Fatalf("another address of the guessing /64 = %d, want 429", w.Code)
	}
	if w := loginFrom(d, "[2001:db8:1:3::1]:1", testToken, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("the next /64 = %d, want 303", w.Code)
	}
	now = now.Add(time.Minute)
	if w := loginFrom(d, "203.0.113.7:4003", testToken, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("the guessing address a minute later = %d, want 303", w.Code)
	}
}

// TestManyAddressesDoNotLockOutTheAdmin: 100 wrong logins in one minute, from
// many addresses, do not stop the right token from another address, and each
// guessing address stays within its own limit.
func TestManyAddressesDoNotLockOutTheAdmin(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	d := New(Options{Token: testToken, Now: func() time.Time { return now }})
	codes := map[int]int{}
	for i := 0; i < 100; i++ {
		w := loginFrom(d, "192.0.2."+strconv.Itoa(1+i%20)+":1", "wrong", nil)
		codes[w.Code]++
	}
	if codes[http.StatusUnauthorized] != 100 {
		t.Fatalf("answers to 100 wrong logins from 20 addresses: %v, want 100 x 401", codes)
	}
	if w := loginFrom(d, "198.51.100.1:5000", testToken, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("the admin after 100 wrong logins from other addresses = %d, want 303", w.Code)
	}
}

// TestBearerGuard: the API's bearer door refuses a missing or wrong token with
// 401, counts the wrong ones against the client (429 past MaxFailedLogins,
// with the right token too, while other clients go on), reports every refusal
// to OnRefused, and paces its WARN lines: one per refusalLogEvery, the next
// one saying how many were not logged.
func TestBearerGuard(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	logs := &recorder{}
	refused := map[string]int{}
	var mu sync.Mutex
	d := New(Options{Token: testToken, Now: func() time.Time { return now }, Logger: slog.New(logs),
		OnRefused: func(door, outcome string) { mu.Lock(); refused[door+"/"+outcome]++; mu.Unlock() }})
	h := d.Bearer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	call := func(remote, auth string) int {
		req := httptest.NewRequest("GET", "http://openbot.example/api/v1/threads", nil)
		req.RemoteAddr = remote
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if c := call("203.0.113.7:1", ""); c != http.StatusUnauthorized {
		t.Fatalf("no token = %d, want 401", c)
	}
	for i := 0; i < 3000; i++ {
		c := call("203.0.113.7:1", "Bearer wrong-"+strconv.Itoa(i))
		want := http.StatusUnauthorized
		if i >= MaxFailedLogins {
			want = http.StatusTooManyRequests
		}
		if c != want {
			t.Fatalf("wrong token %d = %d, want %d", i, c, want)
		}
	}
	if c := call("203.0.113.7:1", "Bearer "+testToken); c != http.StatusTooManyRequests {
		t.Fatalf("the right token from the throttled client = %d, want 429", c)
	}
	if c := call("198.51.100.1:1", "Bearer "+testToken); c != http.StatusNoContent {
		t.Fatalf("the right token from another client = %d, want 204", c)
	}
	want := map[string]int{"bearer/missing": 1, "bearer/wrong_token": MaxFailedLogins, "bearer/throttled": 3000 - MaxFailedLogins + 1}
	if fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Errorf("refusals reported %v, want %v", refused, want)
	}
	if got := logs.warnings(); len(got) != 1 {
		t.Fatalf("%d WARN lines for a flood within one instant, want 1: %v", len(got), got)
	}
	now = now.Add(refusalLogEvery)
	call("203.0.113.7:1", "Bearer again")
	got := logs.warnings()
	if len(got) != 2 || got[1]["unlogged_before"] != "3001" || got[1]["outcome"] != "throttled" {
		t.Fatalf("WARN lines %v, want a second one saying 3001 refusals were not logged", got)
	}

	off := httptest.NewRecorder()
	New(Options{}).Bearer(h).ServeHTTP(off, httptest.NewRequest("GET", "/approvals", nil))
	if off.Code != http.StatusNotFound {
		t.Fatalf("no admin token: %d, want 404", off.Code)
	}
}

// recorder is a slog.Handler keeping the WARN records' attributes as strings.
type recorder struct {
	mu    sync.Mutex
	warns []map[string]string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level < slog.LevelWarn {
		return nil
	}
	m := map[string]string{"msg": rec.Message}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warns = append(r.warns, m)
	return nil
}

func (r *recorder) warnings() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]string(nil), r.warns...)
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
