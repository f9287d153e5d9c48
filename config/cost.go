package config

import (
	"cmp"
	"fmt"
	"math"
	"sort"
)

// Cost is cost control (spec "Cost under control"): prices that turn the
// ledger's tokens into money and the budgets checked when a run starts and
// before each model call. Amounts are in Currency units (5.5 is five and a
// half); the ledger stores them in micro-units.
type Cost struct {
	// Currency names the unit of prices and budgets in notices; default "USD".
	Currency string `yaml:"currency"`
	// Prices by model name (as sent to the server). A model not listed costs 0
	// and `openbot config check` lists it as unpriced.
	Prices map[string]Price `yaml:"prices"`
	// WarnAt is the share of a budget at which one notice is posted in the
	// thread and logged; default 0.8, in (0, 1].
	WarnAt float64 `yaml:"warn_at"`
	// Owner says who can raise a budget, in the notice of a refused run
	// ("@alice in #ops"); default "an operator (budgets in openbot's config)".
	Owner   string  `yaml:"owner"`
	Budgets Budgets `yaml:"budgets"`
}

// Price is a model's list price per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
	// CachedInput prices cached input tokens; 0 charges them at Input.
	CachedInput float64 `yaml:"cached_input"`
}

// Budgets are the limits of cost control; an absent or zero limit is none.
type Budgets struct {
	// Bots by handle; the entry "*" applies to every bot not listed.
	Bots map[string]BotBudget `yaml:"bots"`
	// Thread limits each thread over its whole life.
	Thread Budget `yaml:"thread"`
	// GlobalDaily caps all bots together per UTC day.
	GlobalDaily Budget `yaml:"global_daily"`
}

// BotBudget is one bot's budget per UTC day and per UTC month.
type BotBudget struct {
	Daily   Budget `yaml:"daily"`
	Monthly Budget `yaml:"monthly"`
}

// Budget is a limit in tokens (input plus output) and/or cost (Currency
// units); 0 sets none.
type Budget struct {
	Tokens int64   `yaml:"tokens"`
	Cost   float64 `yaml:"cost"`
}

// Micros converts an amount in currency units to micro-units, rounded.
func Micros(v float64) int64 { return int64(math.Round(v * 1e6)) }

// DefaultCurrency is Cost.Currency's default.
const DefaultCurrency = "USD"

// validateCost: prices and budgets are not negative, warn_at is in (0, 1],
// and a budget names a configured bot or "*".
func (c *Config) validateCost(p *problems, handles map[string]bool) {
	if w := c.Cost.WarnAt; w != 0 && (w <= 0 || w > 1) {
		p.add("cost.warn_at", "must be in (0, 1], got %g", w)
	}
	for _, m := range sortedKeys(c.Cost.Prices) {
		pr := c.Cost.Prices[m]
		for _, f := range []struct {
			name string
			v    float64
		}{{"input", pr.Input}, {"output", pr.Output}, {"cached_input", pr.CachedInput}} {
			if f.v < 0 {
				p.add(fmt.Sprintf("cost.prices.%s.%s", m, f.name), "must not be negative, got %g", f.v)
			}
		}
	}
	check := func(path string, b Budget) {
		if b.Tokens < 0 {
			p.add(path+".tokens", "must not be negative, got %d", b.Tokens)
		}
		if b.Cost < 0 {
			p.add(path+".cost", "must not be negative, got %g", b.Cost)
		}
	}
	check("cost.budgets.thread", c.Cost.Budgets.Thread)
	check("cost.budgets.global_daily", c.Cost.Budgets.GlobalDaily)
	for _, h := range sortedKeys(c.Cost.Budgets.Bots) {
		path := "cost.budgets.bots." + h
		if h != "*" && !handles[h] {
			p.add(path, "%q is not a configured bot", h)
		}
		check(path+".daily", c.Cost.Budgets.Bots[h].Daily)
		check(path+".monthly", c.Cost.Budgets.Bots[h].Monthly)
	}
	if c.Limits.MaxTokensPerRun < 0 {
		p.add("limits.max_tokens_per_run", "must not be negative, got %d", c.Limits.MaxTokensPerRun)
	}
}

// Unpriced lists, sorted, the models the bots use (a bot's model, else its
// profile's) that cost.prices does not price: their calls cost 0.
func (c *Config) Unpriced() []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range c.Bots {
		m := cmp.Or(b.Model, c.LLM[b.LLM.First()].Model)
		if _, ok := c.Cost.Prices[m]; ok || m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
