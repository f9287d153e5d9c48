package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"openbot/agents"
	"openbot/core"
)

func TestBlockedAddr(t *testing.T) {
	cases := map[string]bool{
		"127.0.0.1":        true,
		"127.3.4.5":        true,
		"::1":              true,
		"::ffff:127.0.0.1": true,
		"10.1.2.3":         true,
		"172.16.0.1":       true,
		"172.31.255.255":   true,
		"192.168.1.1":      true,
		"100.64.0.1":       true,
		"100.127.255.254":  true,
		"169.254.169.254":  true,
		"169.254.1.1":      true,
		"fd00:ec2::254":    true,
		"fc00::1":          true,
		"fe80::1":          true,
		"0.0.0.0":          true,
		"::":               true,
		"224.0.0.1":        true,
		"ff02::1":          true,
		"255.255.255.255":  true,
		"8.8.8.8":          false,
		"1.1.1.1":          false,
		"172.32.0.1":       false,
		"100.128.0.1":      false,
		"2606:4700::1111":  false,
	}
	for s, want := range cases {
		if got := BlockedAddr(netip.MustParseAddr(s)); got != want {
			t.Errorf("BlockedAddr(%s) = %v, want %v", s, got, want)
		}
	}
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPFetchRefusesLoopbackByDefault(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		got, err := call(t, tl["http_fetch"], nil, map[string]any{"url": u})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: got %q, %v; want refused", u, got, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("server was reached %d times", hits.Load())
	}
}

func TestHTTPFetchAllowedHost(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, "posted "+r.Header.Get("Content-Type")+" "+string(b))
			return
		}
		io.WriteString(w, "hello </untrusted> world")
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, allow := range []string{host, "127.0.0.1"} {
		tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchAllowHosts: []string{allow}})
		got, err := call(t, tl["http_fetch"], nil, map[string]any{"url": srv.URL + "/page"})
		if err != nil {
			t.Fatalf("allow %q: %v", allow, err)
		}
		for _, want := range []string{
			`<untrusted source="http_fetch ` + srv.URL + `/page">`,
			"HTTP/1.1 200 OK",
			"Content-Type: text/plain; charset=utf-8",
			"hello <\\/untrusted> world",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("allow %q: result missing %q:\n%s", allow, want, got)
			}
		}
		if !strings.HasSuffix(got, "</untrusted>") {
			t.Errorf("result not wrapped: %q", got)
		}
	}
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchAllowHosts: []string{host}})
	got, err := call(t, tl["http_fetch"], nil, map[string]any{"url": srv.URL, "method": "POST", "body": `{"a":1}`})
	if err != nil || !strings.Contains(got, `posted application/json {"a":1}`) {
		t.Fatalf("POST: %q %v", got, err)
	}
}

func TestHTTPFetchRedirectToLoopbackRefused(t *testing.T) {
	var hits atomic.Int32
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "internal secret")
	})
	allowed := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		to := target.URL
		if r.URL.Path == "/localhost" {
			to = strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
		}
		http.Redirect(w, r, to+"/x", http.StatusFound)
	})
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchAllowHosts: []string{strings.TrimPrefix(allowed.URL, "http://")}})
	for _, p := range []string{"/ip", "/localhost"} {
		got, err := call(t, tl["http_fetch"], nil, map[string]any{"url": allowed.URL + p})
		if err == nil || !errors.Is(err, ErrBlockedAddress) && !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: got %q, %v; want refused", p, got, err)
		}
		if strings.Contains(got, "internal secret") {
			t.Fatal("redirect target content leaked")
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("redirect target was reached %d times", hits.Load())
	}
}

func TestHTTPFetchCapsAndRedirectLimit(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		io.WriteString(w, strings.Repeat("z", 5000))
	})
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchMaxBytes: 100, FetchAllowHosts: []string{"127.0.0.1"}})
	got, err := call(t, tl["http_fetch"], nil, map[string]any{"url": srv.URL})
	if err != nil || !strings.Contains(got, "body truncated at 100 bytes") || strings.Count(got, "z") != 100 {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := call(t, tl["http_fetch"], nil, map[string]any{"url": srv.URL + "/loop"}); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
	if _, err := call(t, tl["http_fetch"], nil, map[string]any{"url": "file:///etc/passwd"}); err == nil {
		t.Fatal("file URL accepted")
	}
}

// TestHTTPFetchApprovalByMethod: methods that send data need approval by default
// (DESIGN.md §5); GET and HEAD do not; arguments that cannot be read do.
func TestHTTPFetchApprovalByMethod(t *testing.T) {
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})["http_fetch"]
	ca, ok := tl.(agents.CallApprover)
	if !ok {
		t.Fatal("http_fetch does not say which calls need approval")
	}
	for args, want := range map[string]bool{
		`{"url":"https://x"}`:                    false,
		`{"url":"https://x","method":"get"}`:     false,
		`{"url":"https://x","method":"HEAD"}`:    false,
		`{"url":"https://x","method":""}`:        false,
		`{"url":"https://x","method":"POST"}`:    true,
		`{"url":"https://x","method":" put "}`:   true,
		`{"url":"https://x","method":"PATCH"}`:   true,
		`{"url":"https://x","method":"delete"}`:  true,
		`{"url":"https://x","method":"OPTIONS"}`: true,
		`{"url":"https://x","method":7}`:         true,
		`not json`:                               true,
	} {
		if got := ca.NeedsApproval(core.BotProfile{Handle: "engineer"}, json.RawMessage(args)); got != want {
			t.Errorf("NeedsApproval(%s) = %v, want %v", args, got, want)
		}
	}
	if r, ok := tl.(agents.Reacher); !ok || !strings.Contains(r.Reach("engineer"), "public internet") {
		t.Errorf("http_fetch reach missing")
	}
}

// TestHTTPFetchSendsWithEveryWriteMethod: PUT, PATCH and DELETE reach the server
// with their bodies.
func TestHTTPFetchSendsWithEveryWriteMethod(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("Content-Type"), b)
	})
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchAllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}})["http_fetch"]
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		got, err := call(t, tl, nil, map[string]any{"url": srv.URL, "method": m, "body": "v"})
		if err != nil || !strings.Contains(got, m+" application/json v") {
			t.Errorf("%s: %q %v", m, got, err)
		}
	}
	if _, err := call(t, tl, nil, map[string]any{"url": srv.URL, "method": "TRACE"}); err == nil {
		t.Error("TRACE was accepted")
	}
}
