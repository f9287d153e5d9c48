package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/admin"
	"openbot/config"
	"openbot/core"
)

// runUsage is `openbot usage [--by bot|thread|day|model] [--since WHEN]`: the
// usage ledger (cost control) summed by bot, thread, UTC day or llm profile and
// model (with the provider, the models that answered, the API key labels and
// the calls a backup profile served), from the store or,
// while serve holds it, from the running server's API (GET /api/v1/usage).
// WHEN is an RFC 3339 time, a date (2026-12-01, UTC) or a Go duration back
// from now (72h); default 30 days.
func runUsage(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, cfgPath := configFlags("usage", stderr)
	by := fs.String("by", "day", "sum by bot, thread, day (UTC) or model (llm profile/model)")
	since := fs.String("since", "", "from when: RFC 3339 time, a date (2026-12-01) or a duration back from now (72h); default 30 days")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if *by != "bot" && *by != "thread" && *by != "day" && *by != "model" {
		fmt.Fprintf(stderr, "openbot usage: --by wants bot, thread, day or model, got %q\n", *by)
		return exitUsage
	}
	q := url.Values{"by": {*by}, "limit": {fmt.Sprint(admin.MaxLimit)}}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "openbot usage: --since: %v\n", err)
			return exitUsage
		}
		q.Set("since", t.UTC().Format(time.RFC3339))
	}
	r, cfg, code := readerFor(ctx, *cfgPath, "usage", stdout, stderr, lookupEnv)
	if r == nil {
		return code
	}
	defer r.close()
	rows, err := getAll[admin.UsageRow](ctx, r, "/api/v1/usage?"+q.Encode())
	if err != nil {
		fmt.Fprintf(stderr, "openbot usage: %v\n", err)
		return exitFail
	}
	printUsage(stdout, *by, rows, cfg.Cost.Currency)
	return exitOK
}

// printUsage prints the rows and their total.
func printUsage(w io.Writer, by string, rows []admin.UsageRow, currency string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no model calls in the ledger for this period")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	model := by == "model"
	head := strings.ToUpper(by)
	if model {
		head = "PROFILE/MODEL\tPROVIDER\tSERVED BY\tKEYS\tFALLBACKS"
	}
	fmt.Fprintf(tw, "%s\tRUNS\tCALLS\tINPUT\tCACHED\tOUTPUT\tCOST\n", head)
	var tot admin.UsageRow
	for _, r := range rows {
		key := r.Key
		if model {
			key = fmt.Sprintf("%s\t%s\t%s\t%s\t%d", r.Key, cmp.Or(r.Provider, "-"), cmp.Or(strings.Join(r.Served, ","), "-"),
				cmp.Or(strings.Join(r.Keys, ","), "-"), r.Fallbacks)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\n", key, r.Runs, r.ModelCalls, r.PromptTokens, cached(r), r.CompletionTokens,
			core.FormatMicros(r.CostMicros, currency))
		tot.Runs += r.Runs
		tot.ModelCalls += r.ModelCalls
		tot.PromptTokens += r.PromptTokens
		tot.CachedTokens += r.CachedTokens
		tot.CompletionTokens += r.CompletionTokens
		tot.CostMicros += r.CostMicros
	}
	total := "total"
	if model {
		total = "total\t\t\t\t"
	}
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\n", total, tot.Runs, tot.ModelCalls, tot.PromptTokens, cached(tot), tot.CompletionTokens,
		core.FormatMicros(tot.CostMicros, currency))
	tw.Flush()
}

// parseSince reads --since: an RFC 3339 time, a UTC date, or a duration back
// from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date (2026-12-01) or a duration (72h)", s)
}

// cached is a row's cached input tokens with their share of its input (the
// prompt cache's hit share): "1200 (40%)".
func cached(r admin.UsageRow) string {
	if r.PromptTokens <= 0 {
		return fmt.Sprint(r.CachedTokens)
	}
	return fmt.Sprintf("%d (%d%%)", r.CachedTokens, r.CachedTokens*100/r.PromptTokens)
}
