package postgres_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a store on a fresh schema of the shared cluster.
func open(t *testing.T, opts postgres.Options) (*postgres.Store, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	s, err := postgres.Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

// TestConformance runs the whole core/storetest suite against a real server.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s, _ := open(t, postgres.Options{})
		return s
	})
}

// TestMigrateFromOlderSchema writes a thread as a version 1 binary did (its
// row and the ID counter), reopens with the newest binary: the ledger tables
// appear, the record is kept, the next thread ID follows the old counter and
// the recorded version is the newest.
func TestMigrateFromOlderSchema(t *testing.T) {
	if postgres.SchemaVersion() < 6 {
		t.Fatalf("SchemaVersion = %d, want at least 6 embedded migrations", postgres.SchemaVersion())
	}
	old, dsn := open(t, postgres.Options{SchemaVersion: 1})
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), `INSERT INTO threads (id, data) VALUES (7, '{"id":7,"key":"k"}');
		INSERT INTO counters (name, value) VALUES ('threads', 7)`)
	_ = conn.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	th := core.Thread{ID: 7}
	if err := old.View(t.Context(), func(tx core.ReadTx) error { _, err := tx.UsageEntries(0, 0); return err }); err == nil {
		t.Fatal("version 1 schema has a usage table; the test does not test an upgrade")
	}
	_ = old.Close()

	s, err := postgres.Open(t.Context(), dsn, postgres.Options{})
	if err != nil {
		t.Fatalf("Open over version 1: %v", err)
	}
	defer s.Close()
	err = s.Update(t.Context(), func(tx core.Tx) error {
		if _, err := tx.Thread(th.ID); err != nil {
			return err
		}
		next, err := tx.PutThread(core.Thread{Key: "k2"})
		if err != nil {
			return err
		}
		if next.ID != 8 {
			t.Errorf("next thread ID after upgrade = %d, want 8 (after the old counter)", next.ID)
		}
		_, added, err := tx.PutUsage(core.UsageEntry{Key: "r1/c1"})
		if !added {
			t.Errorf("PutUsage after upgrade did not add")
		}
		return err
	})
	if err != nil {
		t.Fatalf("after upgrade: %v", err)
	}
	if v := schemaVersion(t, dsn); v != postgres.SchemaVersion() {
		t.Errorf("schema_migrations says %d, want %d", v, postgres.SchemaVersion())
	}
}

// TestOpenConcurrently opens a fresh database from several goroutines at once
// (as processes starting together do): the advisory lock lets one migrate and
// the others find the schema done.
func TestOpenConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 2})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	if v := schemaVersion(t, dsn); v != postgres.SchemaVersion() {
		t.Errorf("schema version %d, want %d", v, postgres.SchemaVersion())
	}
}

// TestNewerSchemaRefused: a database a newer binary migrated is not touched.
func TestNewerSchemaRefused(t *testing.T) {
	s, dsn := open(t, postgres.Options{})
	_ = s.Close()
	exec(t, dsn, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'future.sql')`, postgres.SchemaVersion()+1)
	_, err := postgres.Open(t.Context(), dsn, postgres.Options{})
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open over a newer schema = %v, want ErrNewerSchema", err)
	}
}

func schemaVersion(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(t.Context(), `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestBatchAloneFailsAndPanics: a lone Batch call that fails writes nothing and
// returns its own error; one that panics re-raises on the caller's goroutine
// and writes nothing; the store stays usable.
func TestBatchAloneFailsAndPanics(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	boom := errors.New("boom")
	err := s.Batch(t.Context(), func(tx core.Tx) error {
		if _, err := tx.PutThread(core.Thread{Key: "gone"}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Batch = %v, want the call's own error", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("recovered %v, want the call's panic", p)
			}
		}()
		_ = s.Batch(t.Context(), func(tx core.Tx) error {
			_, _ = tx.PutThread(core.Thread{Key: "gone too"})
			panic("kaboom")
		})
	}()
	var th core.Thread
	if err := s.Batch(t.Context(), func(tx core.Tx) error {
		var err error
		th, err = tx.PutThread(core.Thread{Key: "kept"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(t.Context(), func(tx core.ReadTx) error {
		all, err := tx.Threads(0)
		if len(all) != 1 || all[0].ID != th.ID {
			t.Errorf("threads after two rolled-back calls = %+v, want only %d", all, th.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPoolSize: the pool holds 8 connections unless the DSN's pool_max_conns
// or Options.MaxConns says otherwise (Options first).
func TestPoolSize(t *testing.T) {
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		dsn  string
		opt  int32
		want int32
	}{{dsn, 0, 8}, {dsn + sep + "pool_max_conns=3", 0, 3}, {dsn + sep + "pool_max_conns=3", 5, 5}} {
		s, err := postgres.Open(t.Context(), tc.dsn, postgres.Options{MaxConns: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		if got := postgres.MaxConns(s); got != tc.want {
			t.Errorf("Open(%q, MaxConns %d): pool of %d, want %d", tc.dsn, tc.opt, got, tc.want)
		}
		_ = s.Close()
	}
}
