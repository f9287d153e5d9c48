package core

import (
	"context"
	"encoding/json"
	"time"
)

// holdTTL is how long a model call's hold on its budgets lasts when its ledger
// entry never comes (the process died during the call): then it lapses.
const holdTTL = 30 * time.Minute

// hold is one model call's reservation on a budget scope: the estimated
// tokens and cost, until when it lasts (Unix seconds).
type hold struct {
	Tokens int64 `json:"t"`
	Cost   int64 `json:"c"`
	Until  int64 `json:"u"`
}

// holds are the reservations on one scope by usage key, kept in the store's
// cursor "budget.held:<scope>": at most one per model call in flight, lapsed
// ones dropped whenever the scope's holds are written.
type holds map[string]hold

func holdsCursor(scope string) string { return "budget.held:" + scope }

// readHolds reads the holds of scope that have not lapsed at now.
func readHolds(tx ReadTx, scope string, now time.Time) (holds, error) {
	raw, err := tx.Cursor(holdsCursor(scope))
	if err != nil || raw == "" {
		return holds{}, err
	}
	h := holds{}
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return holds{}, nil // unreadable: as if none (they lapse anyway)
	}
	for k, v := range h {
		if v.Until <= now.Unix() {
			delete(h, k)
		}
	}
	return h, nil
}

func (h holds) write(tx Tx, scope string) error {
	if len(h) == 0 {
		return tx.SetCursor(holdsCursor(scope), "")
	}
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return tx.SetCursor(holdsCursor(scope), string(raw))
}

// total is what the holds reserve together, as a UsageTotal.
func (h holds) total() UsageTotal {
	var t UsageTotal
	for _, v := range h {
		t.Tokens += v.Tokens
		t.CostMicros += v.Cost
		t.Calls++
	}
	return t
}

// reserve checks job's budgets before its model call est and holds est's
// tokens and cost (priced by est.Model) against each, in one write
// transaction (one at a time across processes on PostgreSQL too): a budget
// whose spend plus the holds of calls in flight reaches its limit refuses
// the call with a *BudgetError. So runs that start at once see each other's
// calls, and a budget is overrun by at most the one call that started below
// its limit. The ledger entry of the same (run, call) settles the hold
// (settleTx); a hold whose entry never comes lapses after holdTTL.
func (bg *budgets) reserve(ctx context.Context, job *Job, est ModelCall) error {
	c := bg.e.cfg().cost
	if c == nil {
		return nil
	}
	now := bg.e.clock.Now()
	bs := c.budgets(job.Bot.Handle, job.Thread.ID, job.channel, now)
	if len(bs) == 0 {
		return nil
	}
	key := UsageKey(job.Run.ID, est.Call)
	price, _ := c.Prices.For(est.Model)
	h := hold{Tokens: est.InputTokens + est.OutputTokens, Until: now.Add(holdTTL).Unix(),
		Cost: price.Cost(est.InputTokens, est.OutputTokens, est.CachedTokens, est.CacheWriteTokens)}
	return bg.e.store.Update(ctx, func(tx Tx) error {
		all := make([]holds, len(bs))
		for i, b := range bs {
			t, err := tx.UsageTotal(b.scope)
			if err != nil {
				return err
			}
			if all[i], err = readHolds(tx, b.scope, now); err != nil {
				return err
			}
			delete(all[i], key) // a call asked again holds once
			if err := c.refusal(b, t, all[i].total()); err != nil {
				return err
			}
		}
		for i, b := range bs {
			all[i][key] = h
			if err := all[i].write(tx, b.scope); err != nil {
				return err
			}
		}
		return nil
	})
}

// settleTx ends the hold of entry's call on each budget scope it counts
// toward, inside the transaction that stores the entry.
func settleTx(tx Tx, bs []budget, entry UsageEntry) error {
	for _, b := range bs {
		h, err := readHolds(tx, b.scope, entry.At)
		if err != nil {
			return err
		}
		if _, ok := h[entry.Key]; !ok {
			continue
		}
		delete(h, entry.Key)
		if err := h.write(tx, b.scope); err != nil {
			return err
		}
	}
	return nil
}

// refusal is the *BudgetError of budget b when its spend t plus the holds
// held reaches its limit, else nil. The figures are spend and holds together,
// as the ledger will have them once the calls in flight are recorded.
func (c *Cost) refusal(b budget, t, held UsageTotal) error {
	all := UsageTotal{Tokens: t.Tokens + held.Tokens, CostMicros: t.CostMicros + held.CostMicros}
	if b.spentShare(all) < 1 {
		return nil
	}
	spent := c.spent(b, all)
	if held.Calls > 0 {
		spent += ", calls in flight included"
	}
	return &BudgetError{Budget: b.name, Spent: spent, Owner: c.owner()}
}
