package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"openbot/store/bolt"
	"openbot/store/dump"
	"openbot/store/postgres"
)

// runStoreMigrate is `openbot store migrate --from bolt:PATH --to postgres:DSN`
// (DESIGN.md §7): it copies every record of a bbolt store, IDs and counters
// kept, into an empty PostgreSQL database in one transaction, then counts each
// kind on both sides and fails unless they match. openbot must be stopped (the
// bbolt file lock says so). The DSN is never printed: it may hold a password.
func runStoreMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "source store, bolt:PATH")
	to := fs.String("to", "", "target store: postgres:DSN or a postgres:// URL (an empty database; ${DATABASE_URL} in a shell)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	path, okFrom := strings.CutPrefix(*from, "bolt:")
	dsn, okTo := migrateTarget(*to)
	if !okFrom || path == "" || !okTo || dsn == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "usage: openbot store migrate --from bolt:PATH --to postgres:DSN\n")
		return exitUsage
	}
	if err := migrateStore(ctx, path, dsn, stdout); err != nil {
		fmt.Fprintf(stderr, "openbot: store migrate: %v\n", err)
		return exitFail
	}
	return exitOK
}

// migrateTarget reads --to: postgres:DSN, or a bare postgres:// or
// postgresql:// URL (what $DATABASE_URL usually holds). ok is false for
// anything else.
func migrateTarget(to string) (dsn string, ok bool) {
	if strings.HasPrefix(to, "postgres://") || strings.HasPrefix(to, "postgresql://") {
		return to, true
	}
	return strings.CutPrefix(to, "postgres:")
}

func migrateStore(ctx context.Context, path, dsn string, stdout io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	src, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrLocked) {
		return fmt.Errorf("%w: stop openbot first", err)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()

	var want dump.Counts
	err = dst.Import(ctx, func(emit func(dump.Record) error) (dump.Counters, error) {
		counters, counts, err := src.Dump(ctx, emit)
		want = counts
		return counters, err
	})
	if err != nil {
		return err
	}
	got, err := dst.Counts(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	var bad []string
	for _, kind := range dump.AllKinds {
		fmt.Fprintf(stdout, "%-13s %d\n", kind, got[kind])
		if got[kind] != want[kind] {
			bad = append(bad, fmt.Sprintf("%s: source %d, copy %d", kind, want[kind], got[kind]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("verify: counts differ: %s", strings.Join(bad, "; "))
	}
	fmt.Fprintf(stdout, "copied %s into PostgreSQL; every count matches\n", path)
	return nil
}
