package main

import (
	"context"
	"fmt"
	"io"

	"openbot/config"
	"openbot/store/bolt"
)

// runStore is `openbot store compact --config FILE`: it rewrites the store file
// offline so the space freed by retention goes back to the file system
// (DESIGN.md §10 "retention"). openbot must be stopped; a running one holds the
// file lock and the command fails saying so.
func runStore(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, storeUsage)
		return exitOK
	}
	if len(args) > 0 && args[0] == "migrate" {
		return runStoreMigrate(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "compact" {
		fmt.Fprint(stderr, storeUsage)
		return exitUsage
	}
	fs, path := configFlags("store compact", stderr)
	if code, done := parseFlags(fs, args[1:], stderr); done {
		return code
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	res, err := bolt.Compact(ctx, cfg.Store.Path, 0)
	if err != nil {
		fmt.Fprintf(stderr, "openbot: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "compacted %s: %.1f MiB -> %.1f MiB\n", cfg.Store.Path, mib(res.Before), mib(res.After))
	return exitOK
}

const storeUsage = "usage: openbot store compact --config FILE\n       openbot store migrate --from bolt:PATH --to postgres:DSN\n"

func mib(n int64) float64 { return float64(n) / (1 << 20) }
