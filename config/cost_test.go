package config

import (
	"strings"
	"testing"
)

func TestCostValidation(t *testing.T) {
	es := parseErrs(t, minimal+`
cost:
  warn_at: 1.5
  prices:
    m: {input: -1}
  budgets:
    thread: {tokens: -5}
    bots:
      nobody: {daily: {cost: 1}}
      "*": {monthly: {cost: -2}}
`)
	got := es.Error()
	for _, want := range []string{"cost.warn_at", "cost.prices.m.input", "cost.budgets.thread.tokens",
		"cost.budgets.bots.nobody: \"nobody\" is not a configured bot", "cost.budgets.bots.*.monthly.cost"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}

func TestUnpricedModels(t *testing.T) {
	cfg := parseOK(t, minimal+`
cost:
  prices:
    priced-model: {input: 1, output: 2}
`, nil)
	cfg.Bots = append(cfg.Bots, Bot{Handle: "x", LLM: Chain{"default"}, Model: "priced-model"}, Bot{Handle: "y", LLM: Chain{"default"}, Model: "zeta"})
	got := strings.Join(cfg.Unpriced(), ",")
	if !strings.Contains(got, "zeta") || strings.Contains(got, "priced-model") {
		t.Errorf("Unpriced = %q", got)
	}
	if Micros(0.15) != 150000 || Micros(2.5) != 2500000 {
		t.Errorf("Micros(0.15) = %d, Micros(2.5) = %d", Micros(0.15), Micros(2.5))
	}
}
