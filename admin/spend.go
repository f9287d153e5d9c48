package admin

import (
	"cmp"
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"time"

	"openbot/core"
)

// Limits of GET /api/v1/spend.
const (
	// maxSpendBuckets bounds the buckets of one answer: 31 days by hour, a
	// year and a day by day.
	maxSpendBuckets = 24 * 31
	maxSpendDays    = 367
	// maxSpendSeries bounds the series; the keys past it, the cheapest, are
	// summed as "other".
	maxSpendSeries = 12
)

// Spend is GET /api/v1/spend: the usage ledger over [Since, Until) summed per
// Step ("day" or "hour", UTC) and per key of By ("bot", "model", "thread" or
// "channel", the account the thread came in through), with the cost budgets of
// today. Costs are micro-units of Currency.
type Spend struct {
	Currency string        `json:"currency"`
	Step     string        `json:"step"`
	By       string        `json:"by"`
	Since    time.Time     `json:"since"`
	Until    time.Time     `json:"until"`
	Buckets  []int64       `json:"buckets"` // bucket starts, Unix seconds
	Series   []SpendSeries `json:"series"`  // by cost, highest first
	Totals   []SpendTotal  `json:"totals"`  // the same keys, over the whole range
	Budgets  []BudgetBar   `json:"budgets"`
}

// SpendSeries is one key's cost and tokens per bucket.
type SpendSeries struct {
	Key        string  `json:"key"`
	Label      string  `json:"label"`
	CostMicros []int64 `json:"cost_micros"`
	Tokens     []int64 `json:"tokens"`
}

// SpendTotal is one key's sums over the range; CachedTokens are part of
// PromptTokens (their share is the cache-hit share).
type SpendTotal struct {
	Key              string `json:"key"`
	Label            string `json:"label"`
	ModelCalls       int    `json:"model_calls"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CachedTokens     int64  `json:"cached_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	CostMicros       int64  `json:"cost_micros"`
}

// BudgetBar is one budget of the current UTC day and what is spent of it:
// each bot's daily budget (its own or "*") and the global daily one.
type BudgetBar struct {
	Name        string `json:"name"` // "@engineer today", "all bots today"
	SpentMicros int64  `json:"spent_micros"`
	LimitMicros int64  `json:"limit_micros,omitempty"`
	SpentTokens int64  `json:"spent_tokens"`
	LimitTokens int64  `json:"limit_tokens,omitempty"`
}

func (s *Server) spend(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	step, by := cmp.Or(q.str("step"), "day"), cmp.Or(q.str("by"), "bot")
	if step != "day" && step != "hour" {
		q.fail("step: want day or hour, got %q", step)
	}
	if !slices.Contains([]string{"bot", "model", "thread", "channel"}, by) {
		q.fail("by: want bot, model, thread or channel, got %q", by)
	}
	format := q.str("format")
	if format != "" && format != "csv" && format != "json" {
		q.fail("format: want json or csv, got %q", format)
	}
	now := s.opts.Clock.Now().UTC()
	size := 24 * time.Hour
	if step == "hour" {
		size = time.Hour
	}
	since, until := q.time("since"), q.time("until")
	if until.IsZero() {
		until = now
	}
	if since.IsZero() {
		since = until.Add(-7 * 24 * time.Hour)
	}
	since = since.UTC().Truncate(size)
	n := int((until.Sub(since) + size - 1) / size)
	switch {
	case !until.After(since):
		q.fail("until: must be after since")
	case step == "hour" && n > maxSpendBuckets:
		q.fail("since: at most %d hours by hour; choose step=day", maxSpendBuckets)
	case n > maxSpendDays:
		q.fail("since: at most %d days", maxSpendDays)
	}
	if !q.ok(w) {
		return
	}
	var cost core.Cost
	if s.opts.Cost != nil {
		cost = s.opts.Cost()
	}
	out := Spend{Currency: cmp.Or(cost.Currency, "USD"), Step: step, By: by, Since: since, Until: until}
	for i := range n {
		out.Buckets = append(out.Buckets, since.Add(time.Duration(i)*size).Unix())
	}
	series := map[string]*SpendSeries{}
	totals := map[string]*SpendTotal{}
	day := now.Truncate(24 * time.Hour)
	today := map[string]*BudgetBar{}
	all := &BudgetBar{Name: "all bots today"}
	ok := s.view(w, r, func(tx core.ReadTx) error {
		clear(series) // fn may run again (core.Store.View)
		clear(totals)
		clear(today)
		*all = BudgetBar{Name: "all bots today"}
		var after uint64
		for {
			batch, err := tx.UsageEntries(after, ledgerPage)
			if err != nil || len(batch) == 0 {
				return err
			}
			for _, e := range batch {
				after = e.Seq
				if !e.At.Before(day) {
					b := today[e.Bot]
					if b == nil {
						b = &BudgetBar{}
						today[e.Bot] = b
					}
					b.SpentMicros += e.CostMicros
					b.SpentTokens += e.Tokens()
					all.SpentMicros += e.CostMicros
					all.SpentTokens += e.Tokens()
				}
				if e.At.Before(since) || !e.At.Before(until) {
					continue
				}
				key := e.Bot
				switch by {
				case "model":
					key = e.Model
				case "thread":
					key = strconv.FormatUint(uint64(e.Thread), 10)
				case "channel":
					key = cmp.Or(string(e.Account), e.Platform, "unknown")
				}
				sr := series[key]
				if sr == nil {
					sr = &SpendSeries{Key: key, Label: key, CostMicros: make([]int64, n), Tokens: make([]int64, n)}
					series[key] = sr
					totals[key] = &SpendTotal{Key: key, Label: key}
				}
				i := int(e.At.UTC().Sub(since) / size)
				sr.CostMicros[i] += e.CostMicros
				sr.Tokens[i] += e.Tokens()
				t := totals[key]
				t.ModelCalls++
				t.PromptTokens += e.InputTokens
				t.CachedTokens += e.CachedTokens
				t.CompletionTokens += e.OutputTokens
				t.CostMicros += e.CostMicros
			}
		}
	})
	if !ok {
		return
	}
	if by == "thread" {
		_ = s.opts.Store.View(r.Context(), func(tx core.ReadTx) error {
			for key, t := range totals {
				id, _ := strconv.ParseUint(key, 10, 64)
				if th, err := tx.Thread(core.ThreadID(id)); err == nil {
					t.Label = "#" + key + " " + cmp.Or(th.Title, th.Key)
					series[key].Label = t.Label
				}
			}
			return nil
		})
	}
	for _, t := range totals {
		out.Totals = append(out.Totals, *t)
	}
	byCost := func(a, b SpendTotal) int {
		return cmp.Or(cmp.Compare(b.CostMicros, a.CostMicros), cmp.Compare(a.Key, b.Key))
	}
	slices.SortFunc(out.Totals, byCost)
	var other *SpendSeries
	for i, t := range out.Totals {
		if i < maxSpendSeries {
			out.Series = append(out.Series, *series[t.Key])
			continue
		}
		if other == nil {
			other = &SpendSeries{Key: "other", Label: "all others", CostMicros: make([]int64, n), Tokens: make([]int64, n)}
		}
		for j := range n {
			other.CostMicros[j] += series[t.Key].CostMicros[j]
			other.Tokens[j] += series[t.Key].Tokens[j]
		}
	}
	if other != nil {
		out.Series = append(out.Series, *other)
	}
	out.Budgets = budgetBars(cost, s.opts.Bots, today, all)
	if format == "csv" {
		writeSpendCSV(w, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// budgetBars are today's budgets with what is spent of them: each configured
// bot with a daily budget (its own, else "*"), then the global one.
func budgetBars(cost core.Cost, bots []core.BotProfile, today map[string]*BudgetBar, all *BudgetBar) []BudgetBar {
	out := []BudgetBar{}
	for _, b := range bots {
		bb, ok := cost.Bots[b.Handle]
		if !ok {
			bb = cost.Bots["*"]
		}
		if bb.Daily.CostMicros == 0 && bb.Daily.Tokens == 0 {
			continue
		}
		bar := BudgetBar{Name: "@" + b.Handle + " today", LimitMicros: bb.Daily.CostMicros, LimitTokens: bb.Daily.Tokens}
		if t := today[b.Handle]; t != nil {
			bar.SpentMicros, bar.SpentTokens = t.SpentMicros, t.SpentTokens
		}
		out = append(out, bar)
	}
	if g := cost.GlobalDaily; g.CostMicros > 0 || g.Tokens > 0 {
		all.LimitMicros, all.LimitTokens = g.CostMicros, g.Tokens
		out = append(out, *all)
	}
	return out
}

// writeSpendCSV writes the answer as CSV: one line per bucket and key with
// spend, the cost with six decimals in the named currency.
func writeSpendCSV(w http.ResponseWriter, sp Spend) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="openbot-spend-`+sp.By+`-`+sp.Step+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"bucket_start_utc", sp.By, "tokens", "cost", "currency"})
	for _, sr := range sp.Series {
		for i, at := range sp.Buckets {
			if sr.CostMicros[i] == 0 && sr.Tokens[i] == 0 {
				continue
			}
			_ = cw.Write([]string{time.Unix(at, 0).UTC().Format(time.RFC3339), sr.Label,
				strconv.FormatInt(sr.Tokens[i], 10), decimal(sr.CostMicros[i]), sp.Currency})
		}
	}
	cw.Flush()
}

// decimal writes micro-units as an amount with six decimals.
func decimal(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strconv.FormatInt(micros%1_000_000, 10)
	for len(frac) < 6 {
		frac = "0" + frac
	}
	return sign + strconv.FormatInt(micros/1_000_000, 10) + "." + frac
}
