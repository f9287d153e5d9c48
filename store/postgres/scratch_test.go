package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"openbot/core"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// TestScratchSchema: a store opened on a scratch schema (URL and key=value
// DSNs) writes into that schema only, and drop removes it; a bad name is
// refused before connecting.
func TestScratchSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", u.Hostname(), u.Port())
	base, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer base.Close()
	for i, d := range []string{dsn, kv} {
		name := fmt.Sprintf("scratch_%d_%d", i, len(t.Name()))
		sdsn, drop, err := postgres.ScratchSchema(t.Context(), d, name)
		if err != nil {
			t.Fatalf("ScratchSchema(%q): %v", d, err)
		}
		st, err := postgres.Open(t.Context(), sdsn, postgres.Options{MaxConns: 2})
		if err != nil {
			t.Fatalf("Open(%q): %v", sdsn, err)
		}
		if err := st.Update(t.Context(), func(tx core.Tx) error { return tx.SetCursor("where", name) }); err != nil {
			t.Fatal(err)
		}
		if st.HintChannel() == base.HintChannel() {
			t.Errorf("%s: scratch store shares the base schema's hint channel", sdsn)
		}
		_ = st.Close()
		var got string
		if err := base.View(t.Context(), func(tx core.ReadTx) error { got, err = tx.Cursor("where"); return err }); err != nil || got != "" {
			t.Errorf("base schema sees the scratch write: %q, %v", got, err)
		}
		if err := drop(context.Background()); err != nil {
			t.Fatalf("drop: %v", err)
		}
		if _, again, err := postgres.ScratchSchema(t.Context(), d, name); err != nil {
			t.Errorf("schema %s not dropped: %v", name, err)
		} else {
			_ = again(context.Background())
		}
	}
	if _, _, err := postgres.ScratchSchema(t.Context(), dsn, "Robert'); DROP"); err == nil {
		t.Error("a bad schema name was accepted")
	}
}
