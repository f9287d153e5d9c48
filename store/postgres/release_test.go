package postgres

import (
	"errors"
	"testing"

	"openbot/core"
	"openbot/store/postgres/pgtest"
)

// TestFailedWriteLeavesNoTransactionOpen fails write transactions in every
// way a pipe can (fn fails before any statement went out, after a read, with
// its read failing, a waiting write failing with COMMIT, a COMMIT answered
// with ROLLBACK) on a store of one connection. After each, the connection in
// the pool is outside any transaction (a REPEATABLE READ one left open would
// show in transaction_isolation), the failed writes did not land, and the
// connection was kept (rolled back, not replaced).
func TestFailedWriteLeavesNoTransactionOpen(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, pgtest.DSN(t), Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	boom := errors.New("boom")
	fails := func(w *writeTx, read string) error {
		if err := w.SetCursor("failed", "landed"); err != nil {
			return err
		}
		var n int
		if err := w.tx.QueryRow(ctx, read).Scan(&n); err != nil {
			return err
		}
		return boom
	}
	runs := 0
	cases := []struct {
		name string
		fn   func(*writeTx) error
		want func(error) bool
	}{
		{"fn fails first", func(*writeTx) error { return boom }, func(err error) bool { return errors.Is(err, boom) }},
		{"fn fails after a read", func(w *writeTx) error { return fails(w, `SELECT 1`) },
			func(err error) bool { return errors.Is(err, boom) }},
		{"read fails", func(w *writeTx) error { return fails(w, `SELECT 1/0`) },
			func(err error) bool { return err != nil && retryable(err) == "" && !errors.Is(err, boom) }},
		{"waiting write fails with COMMIT", func(w *writeTx) error {
			w.tx.later("divide", `SELECT 1/0`)
			return w.SetCursor("failed", "landed")
		}, func(err error) bool { return err != nil && retryable(err) == "" }},
		{"COMMIT answers ROLLBACK", func(w *writeTx) error {
			runs++
			if runs > 1 {
				return boom // the rerun, after the rolled-back COMMIT
			}
			if err := w.SetCursor("failed", "landed"); err != nil {
				return err
			}
			var n int
			_ = w.tx.QueryRow(ctx, `SELECT 1/0`).Scan(&n) // ignored: COMMIT rolls back
			return nil
		}, func(err error) bool { return errors.Is(err, boom) && runs == 2 }},
	}
	conns := s.pool.Stat().NewConnsCount()
	for _, c := range cases {
		if err := s.write(ctx, c.fn); !c.want(err) {
			t.Errorf("%s: write = %v", c.name, err)
		}
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var iso string
		err = pc.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso)
		status := pc.Conn().PgConn().TxStatus()
		pc.Release()
		if err != nil {
			t.Fatal(err)
		}
		if iso == "repeatable read" || status != 'I' {
			t.Errorf("%s: the pool's connection is in a transaction (isolation %s, status %c)", c.name, iso, status)
		}
		err = s.View(ctx, func(tx core.ReadTx) error {
			v, err := tx.Cursor("failed")
			if v != "" {
				t.Errorf("%s: a failed write landed: cursor %q", c.name, v)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.pool.Stat().NewConnsCount(); n != conns {
		t.Errorf("%d new connections after failed writes, want none (rolled back, not replaced)", n-conns)
	}
	if err := s.write(ctx, func(w *writeTx) error { return w.SetCursor("after", "ok") }); err != nil {
		t.Fatalf("write after the failures: %v", err)
	}
}
