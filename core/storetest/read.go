package storetest

import (
	"context"
	"testing"

	"openbot/core"
)

// Read answers read run in one read transaction of st, failing t when the
// transaction or read fails: a test's look into the store, as in
// storetest.Read(t, st, func(tx core.ReadTx) ([]core.Message, error) { return tx.Messages(id, 0, 0) }).
func Read[T any](t testing.TB, st interface {
	View(context.Context, func(core.ReadTx) error) error
}, read func(core.ReadTx) (T, error)) T {
	t.Helper()
	var out T
	if err := st.View(context.Background(), func(tx core.ReadTx) (err error) {
		out, err = read(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
