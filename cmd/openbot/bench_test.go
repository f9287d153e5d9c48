package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// TestBenchIngest runs BenchmarkIngest's measurement small and checks every
// figure is printed.
func TestBenchIngest(t *testing.T) {
	var out bytes.Buffer
	f, err := runIngestBench(t.Context(), ingestBench{dir: t.TempDir(), n: 200, workers: 8, queued: 2000, paced: 20, rate: 200}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if f.raw <= 0 || f.ingest <= 0 || f.p50 <= 0 || f.p99 < f.p50 {
		t.Errorf("figures %+v: want positive rates and p50 <= p99", f)
	}
	for _, want := range []string{"raw bbolt Batch:", "core Ingest:", "ratio:", "Ingest latency at 200 msg/s: p50", "pick,     10 queued", "pick,   2000 queued"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchPostgres runs BenchmarkPostgres's measurement small against a throwaway
// cluster: the pick costs and one table with bbolt and 1 and 2 engines sharing
// the database are printed, every paced message reached the model in each,
// and the scratch schemas are gone afterwards.
func TestBenchPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	var out bytes.Buffer
	b := &pgBench{dsn: dsn, n: 200, workers: 8, queued: 2000, paced: 20, rate: 100, processes: 2, dir: t.TempDir()}
	rows, err := runPGBench(t.Context(), b, &out)
	if err != nil {
		t.Fatalf("%v\nstdout: %s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	for _, want := range []string{"pick, PostgreSQL,    100 queued", "pick, PostgreSQL,   2000 queued",
		"Ingest with 8 writers; event -> model request of 20 messages at 100 msg/s:", "ingest msg/s  ×1 engine  ×bbolt",
		"bbolt, 1 engine", "PostgreSQL, 1 engine ", "PostgreSQL, 2 engines"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want bbolt, 1 and 2 engines", len(rows))
	}
	for _, f := range rows {
		if f.answered != 20 || f.ingest <= 0 || f.p50 <= 0 || f.p99 < f.p50 {
			t.Errorf("%s: %+v, want every message answered and figures", f.label, f)
		}
	}
	if n := strings.Count(out.String(), " 20/20"); n != 3 {
		t.Errorf("%d of 3 rows show every message reaching the model:\n%s", n, out.String())
	}
	// A scratch schema of the same name can be made again: the bench dropped it.
	for _, what := range []string{"pick0_100", "pick1_2000", "shared1", "shared2"} {
		_, drop, err := postgres.ScratchSchema(t.Context(), dsn, fmt.Sprintf("openbot_bench_%d_%s", os.Getpid(), what))
		if err != nil {
			t.Errorf("scratch schema %s left behind: %v", what, err)
			continue
		}
		_ = drop(context.Background())
	}
}

// TestBenchPlatform runs BenchmarkPlatform's measurement small for Telegram and Slack
// and checks every figure is printed and every message reached the model.
func TestBenchPlatform(t *testing.T) {
	for _, tc := range []struct {
		platform string
		want     []string
	}{
		{"telegram", []string{"telegram polling:", "updates/s batched", "updates/s one by one", "telegram at 50 msg/s for 200ms (max_parallel_threads 64): event -> model request p50", "10/10 answered", "telegram backlog:", "RSS:", "memory:            RSS",
			"peak during the run: Go", "after the run:       Go", "goroutines", "ms a message (user+sys"}},
		{"slack", []string{"slack at 50 msg/s for 200ms (max_parallel_threads 64): event -> model request p50", "10/10 answered", "behind:", "store:             ", "writes a message", "the writer busy", "a commit (fsyncs included) p50", "over 5ms", "disk:              a 4 KiB write and fdatasync after 5ms idle: p50", "RSS:",
			"memory:            RSS", "settled:           RSS", "after 10ms idle", "heap profile:", "heap objects", "stacks",
			"cpu profile:", "cpu:               ", "ms a message (user+sys"}},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			var out bytes.Buffer
			dir := t.TempDir()
			prof, cpu := filepath.Join(dir, "heap.pprof"), filepath.Join(dir, "cpu.pprof")
			pb := platformBench{platform: tc.platform, rate: 50, duration: 200 * time.Millisecond, burst: 200, parallel: 64, dir: dir}
			if tc.platform == "slack" {
				pb.settle, pb.heapProfile, pb.cpuProfile = 10*time.Millisecond, prof, cpu
			}
			f, err := benchPlatform(t.Context(), pb, &out)
			if err != nil {
				t.Fatalf("%v\nstdout: %s", err, out.String())
			}
			if f.answered != 10 || leadingKB(f.idleRSS) <= 0 || (tc.platform == "telegram") != (f.polled > 0) {
				t.Errorf("figures: %d answered, idle RSS %q, polled %.0f/s", f.answered, f.idleRSS, f.polled)
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			for _, p := range []string{prof, cpu} {
				if fi, err := os.Stat(p); tc.platform == "slack" && (err != nil || fi.Size() == 0) {
					t.Errorf("no profile written to %s: %v", p, err)
				}
			}
		})
	}
}

// TestBenchPlatformRefuses: what BenchmarkPlatform cannot run is refused before
// anything starts, naming the flag.
func TestBenchPlatformRefuses(t *testing.T) {
	ok := platformBench{platform: "slack", rate: 1, duration: time.Second, parallel: 1, dir: t.TempDir()}
	for _, tc := range []struct {
		change func(*platformBench)
		want   string
	}{
		{func(b *platformBench) { b.platform = "irc" }, `platform "irc" is not telegram or slack`},
		{func(b *platformBench) { b.rate = 0 }, "-rate must be positive, got 0"},
		{func(b *platformBench) { b.settle = -time.Second }, "-settle must not be negative, got -1s"},
	} {
		b := ok
		tc.change(&b)
		if _, err := benchPlatform(t.Context(), b, io.Discard); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestStatusRSSPeak: the peak printed is never below an RSS read before it,
// although the kernel's VmHWM may lag.
func TestStatusRSSPeak(t *testing.T) {
	var seen atomic.Int64
	now, peak := statusRSS("VmHWM:\t   30000 kB\nVmRSS:\t   38184 kB\nRssAnon:\t 19000 kB\nRssFile:\t 19184 kB\n", &seen)
	if !strings.HasPrefix(now, "38184 kB (anonymous 19000 kB, file-backed 19184 kB") || peak != "38184 kB" {
		t.Errorf("now %q, peak %q; want the RSS as the peak", now, peak)
	}
	if _, peak = statusRSS("VmHWM:\t   37996 kB\nVmRSS:\t   35000 kB\n", &seen); peak != "38184 kB" {
		t.Errorf("peak after a lower reading = %q, want the highest seen, 38184 kB", peak)
	}
	if _, peak = statusRSS("VmHWM:\t   40000 kB\nVmRSS:\t   35000 kB\n", &seen); peak != "40000 kB" {
		t.Errorf("peak = %q, want VmHWM when it is higher", peak)
	}
	if now, peak = statusRSS("", &seen); now != "n/a" || peak != "n/a" {
		t.Errorf("empty status: %q, %q", now, peak)
	}
}
