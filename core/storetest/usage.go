package storetest

import (
	"testing"

	"openbot/core"
)

// testUsage: a ledger entry is stored once per key, assigned Seq from 1, and
// counted once in the total of each of its scopes (cost control).
func testUsage(t *testing.T, s core.Store) {
	e := core.UsageEntry{Key: core.UsageKey(7, 1), At: at(0), Bot: "eng", Thread: 3, Run: 7,
		Account: "slack/main", Platform: "slack", Profile: "default", Model: "m",
		InputTokens: 100, OutputTokens: 20, CachedTokens: 10, CostMicros: 1500}
	update(t, s, func(tx core.Tx) error {
		got, added, err := tx.PutUsage(e)
		if err != nil {
			return err
		}
		if !added || got.Seq != 1 {
			t.Errorf("first PutUsage: added=%v seq=%d, want true 1", added, got.Seq)
		}
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		again := e
		again.InputTokens = 999
		_, added, err := tx.PutUsage(again)
		if err != nil {
			return err
		}
		if added {
			t.Error("PutUsage with a stored key added an entry")
		}
		e2 := e
		e2.Key, e2.Run = core.UsageKey(8, 1), 8
		_, added, err = tx.PutUsage(e2)
		if !added {
			t.Error("PutUsage with a new key added nothing")
		}
		return err
	})
	update(t, s, func(tx core.Tx) error {
		if _, _, err := tx.PutUsage(core.UsageEntry{Bot: "eng"}); err == nil {
			t.Error("PutUsage without a key: no error")
		}
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		want := core.UsageTotal{Tokens: 240, CostMicros: 3000, Calls: 2}
		for _, scope := range e.Scopes() {
			got, err := tx.UsageTotal(scope)
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("UsageTotal(%q) = %+v, want %+v", scope, got, want)
			}
		}
		if got, err := tx.UsageTotal("thread:99"); err != nil || got != (core.UsageTotal{}) {
			t.Errorf("UsageTotal(unknown) = %+v, %v; want zero, nil", got, err)
		}
		all, err := tx.UsageEntries(0, 0)
		if err != nil {
			return err
		}
		if len(all) != 2 || all[0].Seq != 1 || all[1].Seq != 2 {
			t.Fatalf("UsageEntries = %+v, want seq 1 and 2", all)
		}
		first := e
		first.Seq = 1
		if all[0] != first {
			t.Errorf("entry round trip:\n got %+v\nwant %+v", all[0], first)
		}
		rest, err := tx.UsageEntries(1, 5)
		if err != nil {
			return err
		}
		if len(rest) != 1 || rest[0].Seq != 2 {
			t.Errorf("UsageEntries(after 1) = %+v, want only seq 2", rest)
		}
		return nil
	})
}
