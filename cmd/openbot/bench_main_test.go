package main

// The benchmarks of DESIGN.md §7 (ingestion, end to end against the platform
// fakes, PostgreSQL, start-up) live beside the product, not in it: the openbot
// binary carries what users run. Run them from the source tree, each once
// (-benchtime 1x), with their own flags after -args:
//
//	go test ./cmd/openbot -run '^$' -bench '^BenchmarkIngest$' -benchtime 1x
//	go test ./cmd/openbot -run '^$' -bench '^BenchmarkPlatform$/slack' -benchtime 1x -args -rate 100 -duration 10s
//	go test ./cmd/openbot -run '^$' -bench '^BenchmarkPlatform$/telegram' -benchtime 1x -args -rate 300 -settle 30s
//	go test ./cmd/openbot -run '^$' -bench '^BenchmarkPostgres$' -benchtime 1x -args -dsn postgres://...
//	go test ./cmd/openbot -run '^$' -bench '^BenchmarkStartup$' -benchtime 1x
//
// Each prints its figures as lines (the closing notes quote them) and reports the
// headline ones as benchmark metrics, so benchstat can compare runs.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Flags of the benchmarks (after -args).
var (
	benchDir      = flag.String("dir", "", "benchmarks: directory for the scratch files (default: a new temporary directory)")
	benchMessages = flag.Int("messages", 5000, "BenchmarkIngest, BenchmarkPostgres: messages to ingest (and raw puts)")
	benchWorkers  = flag.Int("workers", 64, "BenchmarkIngest, BenchmarkPostgres: concurrent writers")
	benchQueued   = flag.Int("queued", 100000, "BenchmarkIngest, BenchmarkPostgres: queued items for the large pick measurement")
	benchRate     = flag.Int("rate", 100, "messages per second: the paced latency measurement's, and BenchmarkPlatform's sending rate")
	benchPaced    = flag.Int("paced", 300, "BenchmarkIngest, BenchmarkPostgres: messages in the paced latency measurement (0: skip it)")
	benchDuration = flag.Duration("duration", 10*time.Second, "BenchmarkPlatform: how long to send messages")
	benchBurst    = flag.Int("burst", 5000, "BenchmarkPlatform/telegram: updates in the polling throughput measurement (0: skip it)")
	benchDSN      = flag.String("dsn", "", "BenchmarkPostgres: DSN of a scratch database (it creates schemas openbot_bench_<pid>_* in it and drops them at the end)")
	benchProcs    = flag.Int("processes", 3, "BenchmarkPostgres: the shared measurement runs 1, 2, ... up to this many engines sharing the database")
	benchParallel = flag.Int("max-parallel", 64, "BenchmarkPlatform (not go test's -parallel): the bench bot's max_parallel_threads (1: one thread at a time)")
	benchSettle   = flag.Duration("settle", 0, "BenchmarkPlatform: after the run, wait this long and print the RSS again (0: skip)")
	benchHeap     = flag.String("heap-profile", "", "BenchmarkPlatform: write a pprof heap profile to this file when the last message reached the model")
	benchCPU      = flag.String("cpu-profile", "", "BenchmarkPlatform: write a pprof CPU profile of the process while the messages are sent to this file")
)

// scratchDir is -dir, or a temporary directory removed when b ends.
func scratchDir(b *testing.B) string {
	if *benchDir != "" {
		d, err := os.MkdirTemp(*benchDir, "openbot-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}

// BenchmarkIngest: raw bbolt Batch against durable core Ingest at -workers
// writers, Ingest latency paced at -rate, and the cost of a pick
// (runIngestBench).
func BenchmarkIngest(b *testing.B) {
	for range b.N {
		f, err := runIngestBench(b.Context(), ingestBench{dir: scratchDir(b), n: *benchMessages, workers: *benchWorkers,
			queued: *benchQueued, rate: *benchRate, paced: *benchPaced}, os.Stdout)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(f.raw, "raw-puts/s")
		b.ReportMetric(f.ingest, "ingest-msgs/s")
		b.ReportMetric(f.ingest/f.raw, "ingest/raw")
		if f.p50 > 0 {
			b.ReportMetric(ms(f.p50), "paced-p50-ms")
			b.ReportMetric(ms(f.p99), "paced-p99-ms")
		}
	}
}

// BenchmarkPlatform runs openbot's serve wiring in this process against the
// Telegram and the Slack fake and a fake model, at -rate for -duration
// (benchPlatform).
func BenchmarkPlatform(b *testing.B) {
	for _, platform := range []string{"telegram", "slack"} {
		b.Run(platform, func(b *testing.B) {
			for range b.N {
				f, err := benchPlatform(b.Context(), platformBench{platform: platform, rate: *benchRate, duration: *benchDuration,
					burst: *benchBurst, parallel: *benchParallel, settle: *benchSettle, heapProfile: *benchHeap,
					cpuProfile: *benchCPU, dir: scratchDir(b)}, os.Stdout)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ms(f.p50), "p50-ms")
				b.ReportMetric(ms(f.p99), "p99-ms")
				b.ReportMetric(f.throughput, "msgs/s")
				if f.cpuOK && f.answered > 0 {
					b.ReportMetric(ms(f.cpu)/float64(f.answered), "cpu-ms/msg")
				}
				if kb := leadingKB(f.idleRSS); kb > 0 {
					b.ReportMetric(float64(kb)/1024, "idle-RSS-MiB")
				}
				if kb := leadingKB(f.burstRSS); kb > 0 {
					b.ReportMetric(float64(kb)/1024, "after-RSS-MiB")
				}
				if f.polled > 0 {
					b.ReportMetric(f.polled, "polled-updates/s")
				}
			}
		})
	}
}

// BenchmarkPostgres measures PostgreSQL beside bbolt, 1 to -processes engines
// sharing the database (runPGBench); it needs -dsn, a scratch database.
func BenchmarkPostgres(b *testing.B) {
	if *benchDSN == "" {
		b.Skip("needs -dsn: a scratch PostgreSQL database")
	}
	if *benchProcs < 1 {
		b.Fatalf("-processes %d: want at least 1", *benchProcs)
	}
	for range b.N {
		pb := &pgBench{dsn: *benchDSN, n: *benchMessages, workers: *benchWorkers, queued: *benchQueued, processes: *benchProcs,
			paced: *benchPaced, rate: *benchRate, dir: scratchDir(b)}
		rows, err := runPGBench(b.Context(), pb, os.Stdout)
		if err != nil {
			b.Fatal(err)
		}
		for i, f := range rows {
			name := "bbolt"
			if i > 0 {
				name = fmt.Sprintf("pg%d", i)
			}
			b.ReportMetric(f.ingest, name+"-ingest-msgs/s")
			if f.answered > 0 {
				b.ReportMetric(ms(f.p50), name+"-p50-ms")
				b.ReportMetric(ms(f.p99), name+"-p99-ms")
			}
		}
	}
}

// leadingKB is the number of kB a memRSS figure starts with ("38184 kB (...)"),
// 0 when it has none.
func leadingKB(rss string) int64 {
	num, _, _ := strings.Cut(rss, " ")
	return max(0, kB(num))
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ms is d in milliseconds, as figures are printed.
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
