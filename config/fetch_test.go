package config

import (
	"strings"
	"testing"
)

// TestFetchPolicyConfig: a bot's fetch policy loads; a bad unlisted mode, a
// wildcard, a URL or a host:port in allow_domains are each named at their
// field.
func TestFetchPolicyConfig(t *testing.T) {
	const head = "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, fetch: "
	cfg, err := Parse([]byte(head+"{allow_domains: [docs.example.com, GitHub.com, 10.0.0.5], unlisted: ask}}]"), nil)
	if err != nil {
		t.Fatalf("a good policy: %v", err)
	}
	if f := cfg.Bots[0].Fetch; len(f.AllowDomains) != 3 || f.Unlisted != "ask" {
		t.Fatalf("fetch = %+v", f)
	}
	tests := []struct {
		name, fetch, path, msgPart string
	}{
		{"mode", "{unlisted: deny}", "bots[0].fetch.unlisted", `"deny" is not one of`},
		{"wildcard", "{allow_domains: ['*.github.com']}", "bots[0].fetch.allow_domains[0]", `write "github.com"`},
		{"url", "{allow_domains: ['https://github.com/x']}", "bots[0].fetch.allow_domains[0]", "not a domain name"},
		{"port", "{allow_domains: ['github.com:443']}", "bots[0].fetch.allow_domains[0]", "not a domain name"},
		{"typo", "{allow_domain: [x.com]}", "bots[0].fetch.allow_domain", "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := parseErrs(t, head+tt.fetch+"}]")
			if len(es) != 1 || es[0].Path != tt.path || !strings.Contains(es[0].Msg, tt.msgPart) {
				t.Errorf("errors:\n%v\nwant one: %s: ...%s...", es, tt.path, tt.msgPart)
			}
		})
	}
}
