package admin

import (
	"strconv"
	"strings"
	"time"

	"openbot/core"
)

// Bounds of finding a run's entries in the usage ledger.
const (
	// ledgerSkew is how far before a run's creation its entries are looked
	// for: processes sharing a store append with their own clocks.
	ledgerSkew = time.Minute
	// runLedgerScan bounds the entries read for one run.
	runLedgerScan = 20000
)

// runCosts returns the cost of each model call of run (by call number, from
// 1) from the usage ledger. The ledger is in append order, which follows
// time: a binary search on Seq finds the first entry near the run's creation,
// and the scan stops past its end (or after runLedgerScan entries).
func runCosts(tx core.ReadTx, run core.Run) (map[int]int64, error) {
	at := func(seq uint64) (time.Time, bool, error) { // the entry after seq
		e, err := tx.UsageEntries(seq, 1)
		if err != nil || len(e) == 0 {
			return time.Time{}, false, err
		}
		return e[0].At, true, nil
	}
	from := run.Created.Add(-ledgerSkew)
	// The largest power of two past the end, then a binary search for the
	// last seq whose next entry is before from.
	hi := uint64(1)
	for {
		t, ok, err := at(hi)
		if err != nil {
			return nil, err
		}
		if !ok || !t.Before(from) {
			break
		}
		hi *= 2
	}
	lo := uint64(0)
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		t, ok, err := at(mid)
		if err != nil {
			return nil, err
		}
		if ok && t.Before(from) {
			lo = mid
		} else {
			hi = mid
		}
	}
	end := run.Ended
	if end.IsZero() {
		end = time.Now()
	}
	end = end.Add(ledgerSkew)
	out := map[int]int64{}
	prefix := "run:" + strconv.FormatUint(uint64(run.ID), 10) + ":call:"
	after := lo
	for read := 0; read < runLedgerScan; {
		batch, err := tx.UsageEntries(after, ledgerPage)
		if err != nil || len(batch) == 0 {
			return out, err
		}
		for _, e := range batch {
			after = e.Seq
			if e.At.After(end) {
				return out, nil
			}
			if e.Run != run.ID || !strings.HasPrefix(e.Key, prefix) {
				continue
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(e.Key, prefix)); err == nil {
				out[n] = e.CostMicros
			}
		}
		read += len(batch)
	}
	return out, nil
}
