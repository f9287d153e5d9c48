package storetest

import (
	"errors"
	"testing"
	"time"

	"openbot/core"
)

// testLeases checks the lease records (core/lease.go): put, replace, prefix
// listing by key, delete, and TakeLeaseTx's first-taker-wins rule on them.
func testLeases(t *testing.T, s core.Store) {
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Lease("lane/slack/a/C1")
		wantNotFound(t, "Lease(absent)", err)
		wantEqual(t, "Leases(empty)", len(get(tx.Leases("")).must(t)), 0)
		return nil
	})
	now := at(0)
	update(t, s, func(tx core.Tx) error {
		for _, l := range []core.Lease{
			{Key: "lane/slack/a/C2", Owner: "p1", Until: at(10)},
			{Key: "ingress/telegram/main", Owner: "p2", Until: at(10)},
			{Key: "lane/slack/a/C1", Owner: "p1", Until: at(10)},
		} {
			if err := tx.PutLease(l); err != nil {
				return err
			}
		}
		if err := tx.PutLease(core.Lease{Key: "x"}); err == nil {
			t.Error("PutLease without owner: no error")
		}
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		// p2 cannot take p1's live lane; p1 renews it.
		if _, err := core.TakeLeaseTx(tx, "lane/slack/a/C1", "p2", now, 5*time.Second); !errors.Is(err, core.ErrLeaseHeld) {
			t.Errorf("take a live lease of another: err %v, want ErrLeaseHeld", err)
		}
		l, err := core.TakeLeaseTx(tx, "lane/slack/a/C1", "p1", now, 20*time.Second)
		if err != nil {
			return err
		}
		wantEqual(t, "renewed until", l.Until.Equal(at(20)), true)
		// An expired lease is anyone's.
		if _, err := core.TakeLeaseTx(tx, "ingress/telegram/main", "p3", at(11), 5*time.Second); err != nil {
			t.Errorf("take an expired lease: %v", err)
		}
		return core.DropLeaseTx(tx, "lane/slack/a/C2", "p9") // not p9's: kept
	})
	view(t, s, func(tx core.ReadTx) error {
		lanes := get(tx.Leases("lane/")).must(t)
		var keys []string
		for _, l := range lanes {
			keys = append(keys, l.Key)
		}
		wantEqual(t, "Leases(lane/)", keys, []string{"lane/slack/a/C1", "lane/slack/a/C2"})
		l := get(tx.Lease("lane/slack/a/C1")).must(t)
		wantEqual(t, "Lease(C1).Until", l.Until.Equal(at(20)), true)
		wantEqual(t, "Lease(ingress).Owner", get(tx.Lease("ingress/telegram/main")).must(t).Owner, "p3")
		return nil
	})
	update(t, s, func(tx core.Tx) error {
		if err := core.DropLeaseTx(tx, "lane/slack/a/C2", "p1"); err != nil {
			return err
		}
		return tx.DeleteLease("absent")
	})
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Lease("lane/slack/a/C2")
		wantNotFound(t, "Lease(dropped)", err)
		wantEqual(t, "Leases(all)", len(get(tx.Leases("")).must(t)), 2)
		return nil
	})
}
