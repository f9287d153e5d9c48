package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// UsageReporter is the engine's report of spend for the chat command /usage
// (cost control, "Seeing it"). Adapters find it on their engine by type
// assertion, so an engine without it (a test fake) needs nothing new.
type UsageReporter interface {
	// UsageReport renders for people the ledger totals of the thread currently
	// bound to threadKey (none when "" or unknown) and of bot ("": that
	// thread's default bot, else the engine's) today and this month (UTC), each
	// with its budget and what is left. It reads the store only; errors are
	// store failures.
	UsageReport(ctx context.Context, threadKey, bot string) (string, error)
}

var _ UsageReporter = (*Engine)(nil)

// UsageReport implements UsageReporter.
func (e *Engine) UsageReport(ctx context.Context, threadKey, bot string) (string, error) {
	return e.budgets.report(ctx, threadKey, bot)
}

// report is UsageReport.
func (bg *budgets) report(ctx context.Context, threadKey, bot string) (string, error) {
	cost := bg.costs()
	now := bg.e.clock.Now()
	var b strings.Builder
	err := bg.e.store.View(ctx, func(tx ReadTx) error {
		b.Reset() // fn may run again (core.Store.View)
		bot := bot
		var t *Thread
		if threadKey != "" {
			id, err := tx.ThreadByKey(threadKey)
			switch {
			case err == nil:
				th, err := tx.Thread(id)
				if err != nil {
					return err
				}
				t = &th
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if bot == "" {
			bot = bg.e.cfg().defaultBot
			if t != nil {
				bot = bg.e.cfg().threadDefault(t)
			}
		}
		bb := cost.botBudget(bot)
		lines := []struct {
			label string
			scope string
			limit Limit
		}{
			{"@" + bot + " today", BotDayScope(bot, now), bb.Daily},
			{"@" + bot + " this month", BotMonthScope(bot, now), bb.Monthly},
			{"All bots today", GlobalDayScope(now), cost.GlobalDaily},
		}
		if t != nil {
			lines = append([]struct {
				label string
				scope string
				limit Limit
			}{{"This thread", ThreadScope(t.ID), cost.Thread}}, lines...)
		} else {
			b.WriteString("No openbot thread here yet.\n")
		}
		for _, l := range lines {
			tot, err := tx.UsageTotal(l.scope)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s: %s\n", l.label, cost.usageLine(tot, l.limit))
		}
		return nil
	})
	return strings.TrimRight(b.String(), "\n"), err
}

// usageLine is "1200 tokens, 0.0042 USD in 3 calls; budget 5.00 USD, 4.9958
// left" (the budget part only when one is set).
func (c *Cost) usageLine(t UsageTotal, l Limit) string {
	s := fmt.Sprintf("%d tokens, %s in %d calls", t.Tokens, FormatMicros(t.CostMicros, c.Currency), t.Calls)
	var parts []string
	if l.CostMicros > 0 {
		parts = append(parts, fmt.Sprintf("budget %s, %s left", FormatMicros(l.CostMicros, c.Currency),
			FormatMicros(max(0, l.CostMicros-t.CostMicros), c.Currency)))
	}
	if l.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("budget %d tokens, %d left", l.Tokens, max(0, l.Tokens-t.Tokens)))
	}
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, "; ")
	}
	return s
}

// UsageAnswer is a chat adapter's answer to /usage (DESIGN.md §10, cost): the
// engine's report (UsageReporter) for the conversation's thread and the
// account's bot (accountBot "*" or "": the thread's default bot), or a short
// sentence when the engine cannot report or the read failed (logged at WARN).
func UsageAnswer(ctx context.Context, engine any, threadKey, accountBot string, log *slog.Logger) string {
	u, ok := engine.(UsageReporter)
	if !ok {
		return "Usage is not available here."
	}
	if accountBot == "*" {
		accountBot = ""
	}
	text, err := u.UsageReport(ctx, threadKey, accountBot)
	if err != nil {
		log.Warn("usage report", "err", err)
		return "Usage could not be read just now; try again."
	}
	return text
}
