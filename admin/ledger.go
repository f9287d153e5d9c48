package admin

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"openbot/core"
)

// ledgerPage is how many ledger entries one read takes while summing.
const ledgerPage = 500

// ledgerUsage sums the usage ledger (one entry per model call, cost control)
// into rows by bot, thread or UTC day, over the entries recorded at or after
// since and before until (zero: no end). threadOf maps a thread row's key back
// to its id, for ordering.
func ledgerUsage(tx core.ReadTx, by string, since, until time.Time) (rows map[string]*UsageRow, threadOf map[string]core.ThreadID, err error) {
	rows, threadOf = map[string]*UsageRow{}, map[string]core.ThreadID{}
	runs := map[string]map[core.RunID]bool{}
	var after uint64
	for {
		batch, err := tx.UsageEntries(after, ledgerPage)
		if err != nil || len(batch) == 0 {
			return rows, threadOf, err
		}
		for _, e := range batch {
			after = e.Seq
			if e.At.Before(since) || (!until.IsZero() && !e.At.Before(until)) {
				continue
			}
			var key string
			switch by {
			case "bot":
				key = e.Bot
			case "thread":
				key = strconv.FormatUint(uint64(e.Thread), 10)
				threadOf[key] = e.Thread
			case "model":
				key = e.Profile + "/" + e.Model
			default:
				key = e.At.UTC().Format(time.DateOnly)
			}
			row := rows[key]
			if row == nil {
				row = &UsageRow{Key: key}
				rows[key] = row
				runs[key] = map[core.RunID]bool{}
			}
			if !runs[key][e.Run] {
				runs[key][e.Run] = true
				row.Runs++
			}
			if by == "model" {
				row.Provider = cmp.Or(e.Provider, row.Provider)
				if e.Served != "" && !slices.Contains(row.Served, e.Served) {
					row.Served = append(row.Served, e.Served)
				}
				if e.KeyLabel != "" && !slices.Contains(row.Keys, e.KeyLabel) {
					row.Keys = append(row.Keys, e.KeyLabel)
				}
				if e.Fallback {
					row.Fallbacks++
				}
			}
			row.ModelCalls++
			row.PromptTokens += int(e.InputTokens)
			row.CompletionTokens += int(e.OutputTokens)
			row.CachedTokens += int(e.CachedTokens)
			row.CostMicros += e.CostMicros
		}
	}
}
