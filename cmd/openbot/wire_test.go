package main

import (
	"log/slog"
	"slices"
	"testing"

	"openbot/agents"
	"openbot/config"
	"openbot/core"
)

// TestBotProfilesToolApprovers: approval_tools entries become the bot's approval
// tool names, and those naming approvers become core.ToolApprovers.
func TestBotProfilesToolApprovers(t *testing.T) {
	cfg, err := config.Parse([]byte(`
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m}}
bots:
  - handle: ops
    tools: [shell, http_fetch]
    approval_tools: [http_fetch, {tool: shell, approvers: ["slack:T1:U1"]}]
    max_parallel_threads: 3
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	b := botProfiles(cfg)[0]
	if b.MaxParallelThreads != 3 {
		t.Errorf("max parallel threads = %d, want 3", b.MaxParallelThreads)
	}
	if !slices.Equal(b.ApprovalTools, []string{"http_fetch", "shell"}) {
		t.Errorf("approval tools = %v", b.ApprovalTools)
	}
	if len(b.ToolApprovers) != 1 || b.ToolApprovers[0].Tool != "shell" || !slices.Equal(b.ToolApprovers[0].Approvers, []core.ActorID{"slack:T1:U1"}) {
		t.Errorf("tool approvers = %+v", b.ToolApprovers)
	}
	reg, err := newRegistry(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if errs := checkTools(cfg, reg); len(errs) != 0 {
		t.Errorf("checkTools = %v", errs)
	}
}

// TestCoreCostMapsAmountsToMicros: prices per million tokens and budgets in
// currency units become core's micro-units.
func TestCoreCostMapsAmountsToMicros(t *testing.T) {
	cfg := &config.Config{Cost: config.Cost{Currency: "EUR", WarnAt: 0.5,
		Prices: map[string]config.Price{"m": {Input: 0.15, Output: 0.6, CachedInput: 0.075}},
		Budgets: config.Budgets{Thread: config.Budget{Cost: 2}, GlobalDaily: config.Budget{Tokens: 9},
			Bots: map[string]config.BotBudget{"*": {Daily: config.Budget{Cost: 5.5}}}}}}
	c := coreCost(cfg)
	if p := c.Prices["m"]; p != (core.Price{Input: 150000, Output: 600000, Cached: 75000}) {
		t.Errorf("price = %+v", p)
	}
	if c.Thread.CostMicros != 2_000_000 || c.GlobalDaily.Tokens != 9 || c.Bots["*"].Daily.CostMicros != 5_500_000 ||
		c.Currency != "EUR" || c.WarnAt != 0.5 {
		t.Errorf("cost = %+v", c)
	}
}

// TestProvidersCarryTheAPI: a profile's provider becomes the agents
// provider's API, and an Anthropic profile without base_url gets Anthropic's.
func TestProvidersCarryTheAPI(t *testing.T) {
	cfg, err := config.Parse([]byte(`
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
  claude: {provider: anthropic, api_key: sk-ant-x, model: c}
bots: [{handle: ops}, {handle: dev, llm: claude}]
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	ps := providers(cfg)
	if p := ps["claude"]; p.API != agents.APIAnthropic || p.BaseURL != config.AnthropicBaseURL || p.APIKey != "sk-ant-x" {
		t.Errorf("claude = %+v", p)
	}
	if p := ps["default"]; p.API != "" || p.BaseURL != "http://127.0.0.1:1/v1" {
		t.Errorf("default = %+v", p)
	}
	if _, err := agents.New(agents.Options{Providers: ps}); err != nil {
		t.Errorf("agents.New: %v", err)
	}
	// Labelled keys travel with their labels; a bot's chain becomes LLM and
	// Fallbacks.
	cfg, err = config.Parse([]byte(`
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m, api_keys: {b: sk-bbbb, a: sk-aaaa}}
  claude: {provider: anthropic, api_key: sk-ant-x, model: c}
bots: [{handle: ops, llm: [default, claude]}]
`), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := providers(cfg)["default"]; len(p.Keys) != 2 || p.Keys[0] != (agents.APIKey{Label: "a", Value: "sk-aaaa"}) || p.APIKey != "" {
		t.Errorf("default = %+v", p)
	}
	if b := botProfiles(cfg)[0]; b.LLM != "default" || !slices.Equal(b.Fallbacks, []string{"claude"}) {
		t.Errorf("bot = %+v", b)
	}
}
