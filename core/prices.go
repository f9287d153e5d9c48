package core

import "strings"

// Prices are model prices by model name (cost control). For finds a model's.
type Prices map[string]Price

// For returns the price of model: the entry of its exact name, else of the
// longest name that model starts with followed by "-" (a dated snapshot,
// "claude-sonnet-4-5-20250929" priced as "claude-sonnet-4-5"); false when
// none applies (the model is unpriced and its calls cost 0).
func (p Prices) For(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best := ""
	for name := range p {
		if len(name) > len(best) && strings.HasPrefix(model, name+"-") {
			best = name
		}
	}
	if best == "" {
		return Price{}, false
	}
	return p[best], true
}

// ShippedPricesTaken is the date of the newest price in ShippedPrices, as the
// providers' public price pages listed them (read through published copies of
// those pages: OpenAI's in June 2026, Anthropic's in March 2026); prices
// change, and the config's cost.prices override them model by model.
const ShippedPricesTaken = "2026-06-04"

// ShippedPrices are list prices in US dollars (micro-dollars per million
// tokens) of common OpenAI and Anthropic models as of ShippedPricesTaken:
// input, output, cached input (a prompt-cache read) and, for Anthropic, a
// prompt-cache write (5-minute cache). They apply when the cost currency is
// USD.
var ShippedPrices = Prices{
	// OpenAI (platform.openai.com/docs/pricing, standard tier, short context).
	"gpt-5.5":      {Input: 5_000_000, Output: 30_000_000, Cached: 500_000},
	"gpt-5.4":      {Input: 2_500_000, Output: 15_000_000, Cached: 250_000},
	"gpt-5.4-mini": {Input: 750_000, Output: 4_500_000, Cached: 75_000},
	"gpt-5.4-nano": {Input: 200_000, Output: 1_250_000, Cached: 20_000},
	"gpt-5.2":      {Input: 1_750_000, Output: 14_000_000, Cached: 175_000},
	"gpt-5.1":      {Input: 1_250_000, Output: 10_000_000, Cached: 125_000},
	"gpt-5":        {Input: 1_250_000, Output: 10_000_000, Cached: 125_000},
	"gpt-5-mini":   {Input: 250_000, Output: 2_000_000, Cached: 25_000},
	"gpt-5-nano":   {Input: 50_000, Output: 400_000, Cached: 5_000},
	"gpt-4.1":      {Input: 2_000_000, Output: 8_000_000, Cached: 500_000},
	"gpt-4.1-mini": {Input: 400_000, Output: 1_600_000, Cached: 100_000},
	"gpt-4.1-nano": {Input: 100_000, Output: 400_000, Cached: 25_000},
	"gpt-4o":       {Input: 2_500_000, Output: 10_000_000, Cached: 1_250_000},
	"gpt-4o-mini":  {Input: 150_000, Output: 600_000, Cached: 75_000},
	"o3":           {Input: 2_000_000, Output: 8_000_000, Cached: 500_000},
	"o4-mini":      {Input: 1_100_000, Output: 4_400_000, Cached: 275_000},
	"o3-mini":      {Input: 1_100_000, Output: 4_400_000, Cached: 550_000},
	// Anthropic (docs.claude.com pricing; cache write at 1.25x input, read at 0.1x).
	"claude-opus-4-6":   {Input: 5_000_000, Output: 25_000_000, Cached: 500_000, CacheWrite: 6_250_000},
	"claude-sonnet-4-6": {Input: 3_000_000, Output: 15_000_000, Cached: 300_000, CacheWrite: 3_750_000},
	"claude-opus-4-5":   {Input: 5_000_000, Output: 25_000_000, Cached: 500_000, CacheWrite: 6_250_000},
	"claude-opus-4-1":   {Input: 15_000_000, Output: 75_000_000, Cached: 1_500_000, CacheWrite: 18_750_000},
	"claude-opus-4":     {Input: 15_000_000, Output: 75_000_000, Cached: 1_500_000, CacheWrite: 18_750_000},
	"claude-sonnet-4-5": {Input: 3_000_000, Output: 15_000_000, Cached: 300_000, CacheWrite: 3_750_000},
	"claude-sonnet-4":   {Input: 3_000_000, Output: 15_000_000, Cached: 300_000, CacheWrite: 3_750_000},
	"claude-3-7-sonnet": {Input: 3_000_000, Output: 15_000_000, Cached: 300_000, CacheWrite: 3_750_000},
	"claude-haiku-4-5":  {Input: 1_000_000, Output: 5_000_000, Cached: 100_000, CacheWrite: 1_250_000},
	"claude-3-5-haiku":  {Input: 800_000, Output: 4_000_000, Cached: 80_000, CacheWrite: 1_000_000},
}
