package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"openbot/agents"
	"openbot/core"
)

// TestFetchPolicyApproval: under a bot's egress policy a GET or HEAD to a
// listed domain (or a subdomain) runs, with or without a query string; a call
// that sends a body asks everywhere; to an unlisted host the default lets a
// plain GET run and asks for one with a query string or user info, "ask" asks
// for every call and "refuse" asks for none (they are refused when run).
func TestFetchPolicyApproval(t *testing.T) {
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir()})["http_fetch"]
	ca := tl.(agents.CallApprover)
	listed := []string{"docs.example.com", "github.com"}
	cases := []struct {
		unlisted, args string
		want           bool
	}{
		{"", `{"url":"https://docs.example.com/a?q=secret"}`, false},
		{"", `{"url":"https://api.github.com/repos?page=2"}`, false},
		{"", `{"url":"https://GitHub.com./x","method":"HEAD"}`, false},
		{"", `{"url":"https://github.com/x","method":"POST"}`, true},
		{"", `{"url":"https://evil.example/page"}`, false},
		{"", `{"url":"https://evil.example/page?d=secret"}`, true},
		{"", `{"url":"https://evil.example/page?"}`, true},
		{"", `{"url":"https://user:pw@evil.example/"}`, true},
		{"", `{"url":"https://notgithub.com/x"}`, false},
		{"", `{"url":"https://notgithub.com/x?y=1"}`, true},
		{"", `{"url":"https://evil.example/","method":"DELETE"}`, true},
		{"read", `{"url":"https://evil.example/?a=1"}`, true},
		{"ask", `{"url":"https://evil.example/page"}`, true},
		{"ask", `{"url":"https://docs.example.com/page"}`, false},
		{"refuse", `{"url":"https://evil.example/page?d=1"}`, false},
		{"refuse", `{"url":"https://docs.example.com/page?d=1"}`, false},
		{"refuse", `{"url":"https://docs.example.com/page","method":"PUT"}`, true},
		{"", `{"url":"::not a url"}`, false},
		{"", `{"url":"::not a url","method":"POST"}`, true},
		{"", `not json`, true},
	}
	for _, tc := range cases {
		bot := core.BotProfile{Handle: "engineer", Fetch: core.FetchPolicy{AllowDomains: listed, Unlisted: tc.unlisted}}
		if got := ca.NeedsApproval(bot, json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("unlisted %q: NeedsApproval(%s) = %v, want %v", tc.unlisted, tc.args, got, tc.want)
		}
	}
}

// TestFetchPolicyRefusesAndStopsRedirects: with unlisted "refuse" a call to an
// unlisted host is refused before anything is sent (agents.ErrNotRun) and a
// listed host is fetched; with "ask" or "refuse" a redirect from a listed host
// to an unlisted one is not followed (an open redirect must not lead past the
// list), while a redirect within the host is.
func TestFetchPolicyRefusesAndStopsRedirects(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, strings.Replace("http://"+r.Host, "localhost", "127.0.0.1", 1)+"/landing?d=secret", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landing", http.StatusFound)
		default:
			w.Write([]byte("landed " + r.Host))
		}
	})
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), FetchAllowHosts: []string{"127.0.0.1", "localhost"}})["http_fetch"]
	fetch := func(unlisted, u string) (string, error) {
		raw, _ := json.Marshal(map[string]string{"url": u})
		return tl.Call(context.Background(), agents.ToolCall{Args: raw, Thread: 7, Run: 1,
			Bot: core.BotProfile{Handle: "engineer", Fetch: core.FetchPolicy{AllowDomains: []string{"localhost"}, Unlisted: unlisted}}})
	}
	if _, err := fetch("refuse", "http://127.0.0.1:"+port+"/page"); !errors.Is(err, agents.ErrNotRun) || !strings.Contains(err.Error(), "refused: 127.0.0.1") {
		t.Fatalf("unlisted host under refuse: %v, want a refusal before running", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the refused call reached the server %d times", n)
	}
	if got, err := fetch("refuse", "http://localhost:"+port+"/page?q=1"); err != nil || !strings.Contains(got, "landed localhost") {
		t.Fatalf("listed host: %q, %v", got, err)
	}
	for _, mode := range []string{"ask", "refuse"} {
		if _, err := fetch(mode, "http://localhost:"+port+"/away"); err == nil || !strings.Contains(err.Error(), "redirected to http://127.0.0.1:"+port+"/landing") {
			t.Errorf("%s: redirect to an unlisted host: %v, want it not followed", mode, err)
		}
		if got, err := fetch(mode, "http://localhost:"+port+"/here"); err != nil || !strings.Contains(got, "landed localhost") {
			t.Errorf("%s: redirect within the host: %q, %v", mode, got, err)
		}
	}
	if got, err := fetch("", "http://localhost:"+port+"/away"); err != nil || !strings.Contains(got, "landed 127.0.0.1") {
		t.Errorf("default policy: redirect %q, %v, want it followed", got, err)
	}
}
