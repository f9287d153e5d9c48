package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/browsertest"
)

// TestDashboardConfigAndReload drives the Config page of a real serve in
// headless Chromium: the running configuration shows with the LLM key and the
// admin token masked (in the page and in the API), and the Reload button,
// after the file changed, reports every changed key with what was done:
// limits and mcp_ready_timeout applied, metrics, files and memory keys as
// needing a restart. The API then serves the new values and the last report,
// and /metrics stays off until the restart, as the report says. The reload is
// in the activity log, stored with the console's identity and the report's
// summary, and so is a later reload of a broken file, refused.
func TestDashboardConfigAndReload(t *testing.T) {
	const apiKey = "sk-test-secret-0123456789"
	llm := openaitest.New(t)
	path, addr, _, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": apiKey, "OPENBOT_ADMIN_TOKEN": testAdminToken})
	defer stop()
	base := "http://" + addr

	ctx := browsertest.Browser(t)
	browsertest.SignIn(t, ctx, base, testAdminToken)
	browsertest.Run(t, ctx, "open the config page",
		browsertest.Click(`nav a[data-nav="config"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="llm.default.api_key"]`)),
	)
	key := browsertest.Value(t, ctx, "the api key", browsertest.Text(`tr[data-key="llm.default.api_key"] td[data-label="Value"]`))
	if key != masked {
		t.Errorf("llm.default.api_key shows %q, want it masked", key)
	}
	hops := browsertest.Value(t, ctx, "limits", browsertest.Text(`tr[data-key="limits.max_bot_hops"] td[data-label="Value"]`))
	if hops != "20" {
		t.Errorf("limits.max_bot_hops shows %q, want 20", hops)
	}
	page := browsertest.Value(t, ctx, "page", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	apiText := browsertest.Value(t, ctx, "the config API", chromedp.Evaluate[string](`fetch("/api/v1/config").then(r => r.text())`, chromedp.EvalAwaitPromise))
	for _, secret := range []string{apiKey, testAdminToken} {
		if strings.Contains(page, secret) || strings.Contains(apiText, secret) {
			t.Errorf("a secret (%.6s…) is in the config page or its API answer", secret)
		}
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for old, repl := range map[string]string{
		"max_bot_hops: 20": "max_bot_hops: 7",
		"enabled: false                  # serve /metrics": "enabled: true                   # serve /metrics",
		"max_file_bytes: 20971520":                         "max_file_bytes: 1048576",
		"reflection_delay: 30s":                            "reflection_delay: 45s",
		"mcp_ready_timeout: 30s":                           "mcp_ready_timeout: 45s",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("config.example.yaml no longer contains %q", old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	browsertest.Run(t, ctx, "reload",
		browsertest.Click(`button[data-act="reload"]`),
		chromedp.WaitVisible(chromedp.CSS(`.reload-report tr[data-key="limits.max_bot_hops"]`)),
	)
	browsertest.WaitText(t, ctx, "#flash", "Reloaded: 2 key(s) applied, 3 need(s) a restart.")
	shown := browsertest.Value(t, ctx, "the report", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll(".reload-report tr[data-key]")].map(r => [r.dataset.key, r.querySelector(".status").textContent]))`))
	want := map[string]string{
		"limits.max_bot_hops": keyApplied, "mcp_ready_timeout": keyApplied,
		"metrics.enabled": keyRestart, "files.max_file_bytes": keyRestart, "memory.reflection_delay": keyRestart,
	}
	if len(shown) != len(want) {
		t.Errorf("the report shows %v, want %v", shown, want)
	}
	for k, v := range want {
		if shown[k] != v {
			t.Errorf("report: %s = %q, want %q", k, shown[k], v)
		}
	}
	browsertest.Screenshots(t, ctx, "config")

	// The API: the running configuration is the new one, with the report.
	var state struct {
		Config     []configEntry `json:"config"`
		LastReload reloadReport  `json:"last_reload"`
	}
	raw := browsertest.Value(t, ctx, "the config API", chromedp.Evaluate[string](`fetch("/api/v1/config").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, e := range state.Config {
		values[e.Key] = e.Value
	}
	if values["limits.max_bot_hops"] != "7" || values["mcp_ready_timeout"] != "45s" || len(state.LastReload.Changes) != 5 {
		t.Errorf("after the reload the API serves max_bot_hops %q, mcp_ready_timeout %q and %d changes",
			values["limits.max_bot_hops"], values["mcp_ready_timeout"], len(state.LastReload.Changes))
	}
	// metrics.enabled needs a restart, and it is not applied until then.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics after a reload that turned it on = %d, want 404 until the restart the report asks for", resp.StatusCode)
	}

	// The activity log: the line is stored with who reloaded and what changed,
	// and the Activity page shows it.
	const summary = "config reloaded by operator: applied limits.max_bot_hops, mcp_ready_timeout; restart needed for metrics.enabled, memory.reflection_delay, files.max_file_bytes"
	lines := reloadActivity(t, ctx)
	if len(lines) != 1 || lines[0].Event != "config.reloaded" || lines[0].Actor != "console:operator" || lines[0].Level != "info" || lines[0].Summary != summary {
		t.Errorf("the activity log's config lines: %+v, want one config.reloaded by console:operator saying %q", lines, summary)
	}
	browsertest.Run(t, ctx, "open the activity page",
		browsertest.Click(`nav a[data-nav="activity"]`),
		chromedp.WaitVisible(chromedp.CSS(`main table`)))
	browsertest.WaitText(t, ctx, "main table", summary)
	browsertest.Screenshots(t, ctx, "activity-reload")

	// A broken file: the reload is refused, and that is in the log too.
	if err := os.WriteFile(path, []byte(strings.Replace(text, "max_bot_hops: 7", "max_bot_hops: lots", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	browsertest.Run(t, ctx, "reload a broken file",
		browsertest.Click(`nav a[data-nav="config"]`),
		chromedp.WaitVisible(chromedp.CSS(`button[data-act="reload"]`)),
		browsertest.Click(`button[data-act="reload"]`))
	browsertest.WaitText(t, ctx, "#flash", "Not reloaded")
	browsertest.WaitText(t, ctx, "main pre.error", "max_bot_hops")
	lines = reloadActivity(t, ctx)
	if len(lines) != 2 || lines[0].Event != "config.reload_refused" || lines[0].Actor != "console:operator" || lines[0].Level != "warn" ||
		!strings.HasPrefix(lines[0].Summary, "config reload by operator refused, the running configuration is kept: ") || !strings.Contains(lines[0].Summary, "max_bot_hops") {
		t.Errorf("the activity log's config lines after a refused reload: %+v", lines)
	}
}

// reloadActivity is the activity log's config lines, newest first, from the
// API the page uses.
func reloadActivity(t *testing.T, ctx context.Context) []core.Activity {
	t.Helper()
	raw := browsertest.Value(t, ctx, "the activity API", chromedp.Evaluate[string](`fetch("/api/v1/activity?kind=config").then(r => r.text())`, chromedp.EvalAwaitPromise))
	var page struct {
		Items []core.Activity `json:"items"`
	}
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		t.Fatalf("activity answer %s: %v", raw, err)
	}
	return page.Items
}
