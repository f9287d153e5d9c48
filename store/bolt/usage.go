package bolt

import (
	"encoding/json"
	"fmt"

	"openbot/core"
	"openbot/store/check"
)

// The usage ledger (schema version 4, cost control): entries by Seq, their
// idempotency keys, and the running totals of each scope a budget reads.

// PutUsage implements core.Tx: the entry is stored once per Key, and added to
// the totals of its Scopes in the same transaction.
func (w *writeTx) PutUsage(e core.UsageEntry) (core.UsageEntry, bool, error) {
	if err := check.Usage(e); err != nil {
		return e, false, err
	}
	keys := w.bucket(bktUsageKeys)
	if keys.Get([]byte(e.Key)) != nil {
		return e, false, nil
	}
	seq, err := w.nextID(bktUsage)
	if err != nil {
		return e, false, err
	}
	e.Seq = seq
	if err := w.put(bktUsage, u64(seq), e); err != nil {
		return e, false, err
	}
	if err := keys.Put([]byte(e.Key), u64(seq)); err != nil {
		return e, false, err
	}
	for _, scope := range e.Scopes() {
		t, err := w.UsageTotal(scope)
		if err != nil {
			return e, false, err
		}
		if err := w.put(bktUsageTotals, []byte(scope), t.Add(e)); err != nil {
			return e, false, err
		}
	}
	return e, true, nil
}

// UsageTotal implements core.ReadTx; an unknown scope is the zero total.
func (r *readTx) UsageTotal(scope string) (core.UsageTotal, error) {
	var t core.UsageTotal
	v := r.bucket(bktUsageTotals).Get([]byte(scope))
	if v == nil {
		return t, nil
	}
	if err := json.Unmarshal(v, &t); err != nil {
		return t, fmt.Errorf("usage total %q: decode: %w", scope, err)
	}
	return t, nil
}

// UsageEntries implements core.ReadTx.
func (r *readTx) UsageEntries(after uint64, limit int) ([]core.UsageEntry, error) {
	var out []core.UsageEntry
	c := r.bucket(bktUsage).Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil && !full(len(out), limit); k, v = c.Next() {
		var e core.UsageEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("usage entry %d: decode: %w", decodeU64(k), err)
		}
		out = append(out, e)
	}
	return out, nil
}
