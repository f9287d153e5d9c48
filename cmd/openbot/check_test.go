package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckReportsEverythingAtOnce: schema problems, unknown tool names and a
// profile without a key come back in one report.
func TestConfigCheckReportsEverythingAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `
llm:
  default: {base_url: "https://api.openai.com/v1", model: m}
bots:
  - {handle: chief_of_staff, tools: [workspace_reed, fs__read]}
  - {handle: chief_of_staff}
default_bot: nobody
limits: {run_timeout: 10minutes}
fetch_allow_hosts: ["http://x/"]
`
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"config", "check", "--config", path}, nil, nil)
	if r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	if strings.Contains(r.stderr, "tools: tools:") {
		t.Errorf("repeated prefix in:\n%s", r.stderr)
	}
	for _, want := range []string{"bots[1].handle", "default_bot", "run_timeout", `bots[0].tools[0]: unknown tool "workspace_reed"`, `bots[0].tools[1]`, "llm.default.api_key", "OPENAI_API_KEY", "fetch_allow_hosts: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestSkippedAccountNamesTheVariable: an account skipped for an empty secret says
// which environment variable to set (an account with an empty secret is
// skipped with one log line naming the variable; the rest keeps running).
func TestSkippedAccountNamesTheVariable(t *testing.T) {
	dir := t.TempDir()
	path := exampleConfig(t, dir, `
slack:
  - name: acme
    bot: "*"
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
telegram:
  - name: tg
    bot: engineer
    token: ${TELEGRAM_TOKEN}
`)
	cfg := loadConfig(path, &strings.Builder{}, envOf(map[string]string{"OPENAI_API_KEY": "k", "SLACK_APP_TOKEN": "xapp-1"}))
	if cfg == nil {
		t.Fatal("config did not load")
	}
	if got := slackMissing(cfg, 0, cfg.Slack[0]); got != "slack[0].bot_token is empty: set SLACK_BOT_TOKEN" {
		t.Errorf("slack: %q", got)
	}
	if got := emptySecrets(cfg, "telegram", 0, "token"); got != "telegram[0].token is empty: set TELEGRAM_TOKEN" {
		t.Errorf("telegram: %q", got)
	}
}

// TestConfigCheckExampleWithoutKey: the example's header suggests `openbot config
// check --config config.example.yaml`; without OPENAI_API_KEY it passes with a
// warning naming the variable.
func TestConfigCheckExampleWithoutKey(t *testing.T) {
	r := runFor(t, []string{"config", "check", "--config", "../../config.example.yaml"}, nil, nil)
	if r.code != 0 || r.stdout != "config ok\n" {
		t.Fatalf("exit %d stdout %q stderr %q, want config ok", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "warning: llm.default.api_key") || !strings.Contains(r.stderr, "set OPENAI_API_KEY") {
		t.Errorf("stderr %q lacks the warning", r.stderr)
	}
}

// TestConfigCheckListsUnpricedModels: a model the bots use that cost.prices
// does not price is listed as unpriced (a warning; the file is valid).
func TestConfigCheckListsUnpricedModels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg.yaml")
	text := `
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: priced}
bots:
  - {handle: chief_of_staff}
  - {handle: engineer, model: cheap-unlisted}
cost:
  prices:
    priced: {input: 1, output: 2}
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"config", "check", "--config", path}, nil, nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `cost.prices: model "cheap-unlisted" is unpriced`) || strings.Contains(r.stderr, `"priced" is unpriced`) {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}
