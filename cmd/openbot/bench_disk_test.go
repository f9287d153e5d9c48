package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// diskSyncs is how many syncs syncLatency times, and syncGap the idle time
// before each: about what a commit sees at 100 msg/s, where commits come a few
// milliseconds apart (a disk's sync is slower after it has been idle).
const (
	diskSyncs = 200
	syncGap   = 5 * time.Millisecond
)

// syncLatency times diskSyncs rewrites of one 4 KiB page of a scratch file in
// dir, each followed by the sync bbolt's commit uses (dataSync: fdatasync on
// Linux), after syncGap idle, and returns the p50
// and p99. A bbolt commit syncs twice (its pages, then its meta page), so this
// is the floor under the bench's commit durations (DESIGN.md §7). The file is
// removed; ctx ends the measurement early with its error.
func syncLatency(ctx context.Context, dir string) (p50, p99 time.Duration, err error) {
	f, err := os.CreateTemp(dir, "sync-*.bin")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	if _, err := f.Write(page); err != nil {
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	d := make([]time.Duration, 0, diskSyncs)
	for i := range diskSyncs {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(syncGap):
		}
		page[0] = byte(i)
		start := time.Now()
		if _, err := f.WriteAt(page, 0); err != nil {
			return 0, 0, err
		}
		if err := dataSync(f); err != nil {
			return 0, 0, fmt.Errorf("sync %s: %w", filepath.Base(f.Name()), err)
		}
		d = append(d, time.Since(start))
	}
	p50, p99 = percentiles(d)
	return p50, p99, nil
}
