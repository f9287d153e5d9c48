package config

import (
	"strings"
	"testing"
)

const budgetConfig = `
llm:
  main:
    base_url: http://127.0.0.1:11434/v1
    model: claude-sonnet-4-5-20250929
  local:
    base_url: http://127.0.0.1:11435/v1
    model: llama3.1
bots:
  - handle: engineer
    llm: [main, local]
cost:
  budgets:
    bots:
      engineer:
        daily: {cost: 5}
`

// TestShippedPricesAndOverride: a dated snapshot takes its family's shipped
// price; cost.prices replaces a shipped entry; another currency drops them.
func TestShippedPricesAndOverride(t *testing.T) {
	cfg := parseOK(t, strings.Replace(budgetConfig, "daily: {cost: 5}", "daily: {tokens: 1000}", 1), nil)
	p, ok := cfg.PriceTable().For("claude-sonnet-4-5-20250929")
	if !ok || p.Input != 3_000_000 || p.CacheWrite != 3_750_000 || p.Cached != 300_000 {
		t.Errorf("shipped price = %+v, %v", p, ok)
	}
	if got := cfg.Unpriced(); len(got) != 1 || got[0] != "llama3.1" {
		t.Errorf("unpriced = %v", got)
	}
	cfg = parseOK(t, strings.Replace(budgetConfig, "cost:\n", "cost:\n  prices:\n    claude-sonnet-4-5: {input: 1, output: 2, cache_write: 1.5}\n    llama3.1: {input: 0, output: 0}\n", 1), nil)
	if p, _ := cfg.PriceTable().For("claude-sonnet-4-5-20250929"); p.Input != 1_000_000 || p.CacheWrite != 1_500_000 {
		t.Errorf("override = %+v", p)
	}
	cfg = parseOK(t, strings.Replace(budgetConfig, "cost:\n", "cost:\n  currency: EUR\n  unpriced: warn\n", 1), nil)
	if _, ok := cfg.PriceTable().For("gpt-4o"); ok {
		t.Error("USD prices applied to EUR")
	}
}

// TestCostBudgetOverUnpricedModel: a cost budget over a chain with an
// unpriced model is an error naming the model and the budget, unless a tokens
// limit sits beside it, the model is priced, or cost.unpriced says warn.
func TestCostBudgetOverUnpricedModel(t *testing.T) {
	es := parseErrs(t, budgetConfig)
	if len(es) != 1 || es[0].Path != "cost.budgets.bots.engineer.daily.cost" || !strings.Contains(es[0].Msg, `model "llama3.1" (llm.local)`) {
		t.Errorf("problems = %v", es)
	}
	star := strings.Replace(budgetConfig, "      engineer:\n", "      \"*\":\n", 1)
	if es := parseErrs(t, star); len(es) != 1 || es[0].Path != "cost.budgets.bots.*.daily.cost" {
		t.Errorf("problems = %v", es)
	}
	parseOK(t, strings.Replace(budgetConfig, "daily: {cost: 5}", "daily: {cost: 5, tokens: 100000}", 1), nil)
	parseOK(t, strings.Replace(budgetConfig, "cost:\n", "cost:\n  prices:\n    llama3.1: {input: 0.1, output: 0.1}\n", 1), nil)
	cfg := parseOK(t, strings.Replace(budgetConfig, "cost:\n", "cost:\n  unpriced: warn\n", 1), nil)
	if w := cfg.UnpricedBudgets(); len(w) != 1 || !strings.Contains(w[0].Msg, "llama3.1") {
		t.Errorf("warnings = %v", w)
	}
	if es := parseErrs(t, strings.Replace(budgetConfig, "cost:\n", "cost:\n  unpriced: sometimes\n", 1)); es[0].Path != "cost.unpriced" {
		t.Errorf("problems = %v", es)
	}
}
