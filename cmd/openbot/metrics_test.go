package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/metrics"
)

func getMetrics(t *testing.T, addr, auth string) (int, string) {
	t.Helper()
	return call(t, http.MethodGet, "http://"+addr+"/metrics", auth, "")
}

// parsesWithMailbox checks that body is the Prometheus text format and holds
// the scrape-time mailbox depth of the example's bots.
func parsesWithMailbox(t *testing.T, body string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	if f := fams["openbot_mailbox_depth"]; f == nil || len(f.GetMetric()) != 4 {
		t.Errorf("openbot_mailbox_depth = %v, want one series per bot of the example", f)
	}
}

// TestServeMetricsOpen: metrics.enabled with auth "none" serves /metrics on the
// shared listener without a token (scrapers inside a network, DESIGN.md §10, Metrics).
func TestServeMetricsOpen(t *testing.T) {
	llm := openaitest.New(t)
	_, addr, _, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL()}, func(c *config.Config) {
		c.Metrics = config.Metrics{Enabled: true, Auth: config.MetricsAuthNone}
	})
	defer stop()
	code, body := getMetrics(t, addr, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %q", code, body)
	}
	parsesWithMailbox(t, body)
	for _, name := range []string{"openbot_store_file_bytes", "openbot_store_records{kind=\"messages\"}"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestServeMetricsToken: with auth "token" /metrics answers only the admin
// bearer token, and a refusal reveals nothing; the refusals are counted in
// openbot_admin_token_refusals_total and logged at WARN.
func TestServeMetricsToken(t *testing.T) {
	llm := openaitest.New(t)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}
	_, addr, logs, stop := serveOnFreePort(t, env, func(c *config.Config) {
		c.Metrics = config.Metrics{Enabled: true, Auth: config.MetricsAuthToken}
	})
	defer stop()
	for _, auth := range []string{"", "Bearer wrong-token-0123456789abcdef"} {
		if code, body := getMetrics(t, addr, auth); code != http.StatusUnauthorized || body != "unauthorized\n" {
			t.Errorf("auth %q: %d %q, want 401 revealing nothing", auth, code, body)
		}
	}
	// A write through the console API: the store's commit is observed.
	postOK(t, addr, "/api/v1/bots/engineer/pause", testAdminToken)
	code, body := getMetrics(t, addr, "Bearer "+testAdminToken)
	if code != http.StatusOK {
		t.Fatalf("right token: %d %q", code, body)
	}
	parsesWithMailbox(t, body)
	if m := regexp.MustCompile(`(?m)^openbot_store_commit_duration_seconds_count (\d+)$`).FindStringSubmatch(body); m == nil || m[1] == "0" {
		t.Errorf("/metrics: store_commit_duration_seconds_count = %v, want the pause's commit", m)
	}
	for _, want := range []string{
		`openbot_admin_token_refusals_total{door="bearer",outcome="missing"} 1`,
		`openbot_admin_token_refusals_total{door="bearer",outcome="wrong_token"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(logs.String(), "admin token refused") {
		t.Errorf("no WARN line for the refused tokens:\n%s", logs.String())
	}
}

// TestServeMetricsOff: metrics are off by default; /metrics is not served.
func TestServeMetricsOff(t *testing.T) {
	llm := openaitest.New(t)
	_, addr, _, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	defer stop()
	if code, body := getMetrics(t, addr, ""); code != http.StatusNotFound || strings.Contains(body, "openbot_") {
		t.Errorf("metrics off: %d %q, want 404", code, body)
	}
}

// TestMCPSetMetrics: the MCP server set reports each server's state to the
// metrics (openbot_mcp_server_state is 1 for "running" once it runs).
func TestMCPSetMetrics(t *testing.T) {
	reg := agents.NewRegistry()
	set := newMCPSet(&config.Config{MCPServers: []config.MCPServer{{Name: "keep", URL: echoMCP(t)}}}, reg, slog.New(slog.DiscardHandler), nil)
	m := metrics.New(metrics.Options{})
	set.metrics = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- set.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	hs := httptest.NewServer(m.Handler())
	defer hs.Close()
	want := `openbot_mcp_server_state{server="keep",state="running"} 1`
	waitUntil(t, want, func() bool {
		_, body := getMetrics(t, strings.TrimPrefix(hs.URL, "http://"), "")
		return strings.Contains(body, want)
	})
}
