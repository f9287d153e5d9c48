package config

import (
	"strings"
	"testing"
)

// metrics: is parsed, "" and "none" mean open, and a bad value or token auth
// without an admin token is an error naming metrics.auth (DESIGN.md §9).
func TestMetricsSection(t *testing.T) {
	const base = "llm: {default: {base_url: \"http://h/v1\", model: m}}\nbots: [{handle: a}]\n"
	cfg := parseOK(t, base+"metrics: {enabled: true}\n", nil)
	if !cfg.Metrics.Enabled || cfg.Metrics.TokenRequired() {
		t.Errorf("metrics = %+v, want enabled without token", cfg.Metrics)
	}
	cfg = parseOK(t, base+"admin: {token: 0123456789abcdef}\nmetrics: {enabled: true, auth: token}\n", nil)
	if !cfg.Metrics.TokenRequired() {
		t.Errorf("metrics = %+v, want token auth", cfg.Metrics)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"metrics: {enabled: true, auth: basic}\n", `"basic" is not one of`},
		{"metrics: {enabled: true, auth: token}\n", "admin.token is empty"},
	} {
		es := parseErrs(t, base+tc.yaml)
		if len(es) != 1 || es[0].Path != "metrics.auth" || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("%q: errors = %v, want metrics.auth: ...%s", tc.yaml, es, tc.want)
		}
	}
}
