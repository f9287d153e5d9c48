package config

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"sort"

	"openbot/core"
)

// Cost is cost control (spec "Cost under control"): prices that turn the
// ledger's tokens into money and the budgets checked when a run starts and
// before each model call. Amounts are in Currency units (5.5 is five and a
// half); the ledger stores them in micro-units.
type Cost struct {
	// Currency names the unit of prices and budgets in notices; default "USD".
	Currency string `yaml:"currency"`
	// Prices by model name (as sent to the server), over the shipped table
	// (core.ShippedPrices, in USD, used when Currency is USD): an entry here
	// replaces the shipped one of its model. A model matches its exact name,
	// else the longest name it starts with followed by "-" (a dated snapshot).
	// A model priced nowhere costs 0 and `openbot config check` lists it.
	Prices map[string]Price `yaml:"prices"`
	// Unpriced says what a cost budget over a bot whose chain has an unpriced
	// model is (its calls would count 0 toward it): UnpricedRefuse (the
	// default) makes it a config error naming the model, UnpricedWarn a
	// warning. Either way a tokens limit set beside the cost in the same
	// budget still holds, and then it is fine.
	Unpriced string `yaml:"unpriced"`
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
	// CachedInput prices input tokens read from a prompt cache, CacheWrite
	// those written to it (Anthropic); 0 charges them at Input.
	CachedInput float64 `yaml:"cached_input"`
	CacheWrite  float64 `yaml:"cache_write"`
}

// The values of cost.unpriced.
const (
	UnpricedRefuse = "refuse"
	UnpricedWarn   = "warn"
)

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
		}{{"input", pr.Input}, {"output", pr.Output}, {"cached_input", pr.CachedInput}, {"cache_write", pr.CacheWrite}} {
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
	if c.Cost.Unpriced != "" {
		checkEnum(p, "cost.unpriced", c.Cost.Unpriced, UnpricedRefuse, UnpricedWarn)
	}
	if c.Cost.Unpriced != UnpricedWarn {
		for _, e := range c.UnpricedBudgets() {
			p.add(e.Path, "%s", e.Msg)
		}
	}
	if c.Limits.MaxTokensPerRun < 0 {
		p.add("limits.max_tokens_per_run", "must not be negative, got %d", c.Limits.MaxTokensPerRun)
	}
}

// PriceTable is the prices model calls are priced by: the shipped table
// (when the currency is USD) with cost.prices over it, in micro-units.
func (c *Config) PriceTable() core.Prices {
	out := core.Prices{}
	if c.Cost.Currency == "" || c.Cost.Currency == DefaultCurrency {
		maps.Copy(out, core.ShippedPrices)
	}
	for m, p := range c.Cost.Prices {
		out[m] = core.Price{Input: Micros(p.Input), Output: Micros(p.Output), Cached: Micros(p.CachedInput), CacheWrite: Micros(p.CacheWrite)}
	}
	return out
}

// chainModels are the models of a bot's chain by profile, in order: the
// bot's model (else its profile's) for the first, each backup's own.
func (c *Config) chainModels(b Bot) [][2]string {
	var out [][2]string
	for i, name := range b.LLM {
		m := c.LLM[name].Model
		if i == 0 {
			m = cmp.Or(b.Model, m)
		}
		if m != "" {
			out = append(out, [2]string{name, m})
		}
	}
	return out
}

// Unpriced lists, sorted, the models the bots' chains use that no price
// applies to (PriceTable): their calls cost 0.
func (c *Config) Unpriced() []string {
	table := c.PriceTable()
	seen := map[string]bool{}
	var out []string
	for _, b := range c.Bots {
		for _, pm := range c.chainModels(b) {
			if _, ok := table.For(pm[1]); ok || seen[pm[1]] {
				continue
			}
			seen[pm[1]] = true
			out = append(out, pm[1])
		}
	}
	sort.Strings(out)
	return out
}

// UnpricedBudgets are the cost budgets that could not count a bot's calls:
// a budget the bot counts toward sets a cost and no tokens limit, and a model
// of the bot's chain has no price. One problem per budget field and model,
// naming both; cost.unpriced says whether they are errors or warnings.
func (c *Config) UnpricedBudgets() []FieldError {
	table := c.PriceTable()
	var out []FieldError
	seen := map[string]bool{}
	for _, b := range c.Bots {
		var missing [][2]string
		for _, pm := range c.chainModels(b) {
			if _, ok := table.For(pm[1]); !ok {
				missing = append(missing, pm)
			}
		}
		if len(missing) == 0 {
			continue
		}
		bb, key := c.Cost.Budgets.Bots[b.Handle], b.Handle
		if _, ok := c.Cost.Budgets.Bots[b.Handle]; !ok {
			bb, key = c.Cost.Budgets.Bots["*"], "*"
		}
		for _, f := range []struct {
			path string
			b    Budget
		}{
			{"cost.budgets.bots." + key + ".daily.cost", bb.Daily},
			{"cost.budgets.bots." + key + ".monthly.cost", bb.Monthly},
			{"cost.budgets.thread.cost", c.Cost.Budgets.Thread},
			{"cost.budgets.global_daily.cost", c.Cost.Budgets.GlobalDaily},
		} {
			if f.b.Cost <= 0 || f.b.Tokens > 0 {
				continue
			}
			for _, pm := range missing {
				if k := f.path + "|" + pm[1]; !seen[k] {
					seen[k] = true
					out = append(out, FieldError{Path: f.path, Msg: fmt.Sprintf(
						"bot @%s calls model %q (llm.%s), which has no price, so this cost budget would not count those calls: price it under cost.prices, set tokens beside the cost, or set cost.unpriced: warn",
						b.Handle, pm[1], pm[0])})
				}
			}
		}
	}
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
