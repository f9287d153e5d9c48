package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func readExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestExampleLoads(t *testing.T) {
	cfg := parseOK(t, readExample(t), map[string]string{"OPENAI_API_KEY": "sk-x"})
	var handles []string
	for _, b := range cfg.Bots {
		handles = append(handles, b.Handle)
		if strings.TrimSpace(b.Instructions) == "" {
			t.Errorf("bot %s has no instructions", b.Handle)
		}
	}
	if got := strings.Join(handles, ","); got != "chief_of_staff,engineer,reviewer,qa" {
		t.Errorf("bots = %s", got)
	}
	if cfg.DefaultBot != "chief_of_staff" {
		t.Errorf("default_bot = %q", cfg.DefaultBot)
	}
	// The coordinating default bot takes every unaddressed message: it serves
	// several threads at once (DESIGN.md §6).
	if n := cfg.Bots[0].MaxParallelThreads; n <= 1 {
		t.Errorf("chief_of_staff max_parallel_threads = %d, want more than 1", n)
	}
	if len(cfg.Console) != 1 || !cfg.Console[0].On() {
		t.Errorf("console = %+v", cfg.Console)
	}
	if len(cfg.Slack)+len(cfg.Telegram)+len(cfg.Feishu) != 0 {
		t.Error("platform accounts are enabled in the example; they should be commented out")
	}
	p := cfg.LLM["default"]
	if p.BaseURL != OpenAIBaseURL || p.APIKey != "sk-x" || p.Model != "gpt-4o-mini" {
		t.Errorf("llm.default = %+v", p)
	}
	chief := cfg.Bots[0].Instructions
	for _, want := range []string{"goal", "paths", "acceptance criteria", "report back", "only the messages addressed"} {
		if !strings.Contains(strings.ToLower(chief), strings.ToLower(want)) {
			t.Errorf("chief_of_staff instructions lack %q", want)
		}
	}
	for _, b := range cfg.Bots[1:] {
		for _, want := range []string{"read_history", "recall_messages", "without an @mention ends the exchange", "@mentioning whoever asked you"} {
			if !strings.Contains(b.Instructions, want) {
				t.Errorf("%s instructions lack %q", b.Handle, want)
			}
		}
	}
}

// TestExampleCommentedSectionsAreValid uncomments the platform and MCP examples and
// checks they parse and validate, so the documentation cannot rot.
func TestExampleCommentedSectionsAreValid(t *testing.T) {
	start := regexp.MustCompile(`^# (slack|telegram|feishu|mcp_servers|schedules):`)
	var out []string
	in := false
	for _, l := range strings.Split(readExample(t), "\n") {
		if start.MatchString(l) {
			in = true
		}
		if in && strings.TrimSpace(l) == "" {
			in = false
		}
		if in {
			l = strings.TrimPrefix(l, "# ")
		}
		out = append(out, l)
	}
	cfg := parseOK(t, strings.Join(out, "\n"), map[string]string{"TELEGRAM_SECRET": "s3cret"})
	if len(cfg.Schedules) != 2 {
		t.Errorf("uncommented example: %d schedules, want 2", len(cfg.Schedules))
	}
	if len(cfg.Slack) != 1 || len(cfg.Telegram) != 1 || len(cfg.Feishu) != 1 || len(cfg.MCPServers) != 2 {
		t.Errorf("uncommented example: slack %d telegram %d feishu %d mcp %d, want 1 1 1 2",
			len(cfg.Slack), len(cfg.Telegram), len(cfg.Feishu), len(cfg.MCPServers))
	}
}

// TestExamplePricesDefaultModelAndShowsBudget: the example prices its default
// model and sets a budget (cost control).
func TestExamplePricesDefaultModelAndShowsBudget(t *testing.T) {
	cfg := parseOK(t, readExample(t), map[string]string{"OPENAI_API_KEY": "sk-x"})
	if u := cfg.Unpriced(); len(u) != 0 {
		t.Errorf("example leaves models unpriced: %v", u)
	}
	if p := cfg.Cost.Prices["gpt-4o-mini"]; p.Input <= 0 || p.Output <= 0 {
		t.Errorf("gpt-4o-mini price = %+v", p)
	}
	if b := cfg.Cost.Budgets.Bots["*"]; b.Daily.Cost <= 0 {
		t.Errorf("example budget for every bot = %+v, want a daily cost", b)
	}
}
