package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"openbot/core"
	"openbot/store/bolt"
)

// ingestBench is what BenchmarkIngest measures: the ingestion figures of
// DESIGN.md §7 on this machine, in one run so they are comparable.
type ingestBench struct {
	dir        string // scratch files
	n, workers int    // messages (and raw puts), concurrent writers
	queued     int    // queued items of the large pick measurement
	rate       int    // messages per second of the paced latency measurement
	paced      int    // messages of the paced latency measurement (0: skip it)
}

// ingestFigures are BenchmarkIngest's results.
type ingestFigures struct {
	raw, ingest float64       // raw bbolt Batch puts/s; core Ingest messages/s
	p50, p99    time.Duration // paced Ingest latency (0 when skipped)
}

// runIngestBench prints the raw bbolt Batch rate, concurrent Ingest throughput
// and their ratio (aim >= 0.7 at 64 writers), the latency of Ingest paced at
// rate messages per second (p50 and p99; aim under 2 ms and 5 ms: with group
// commit a lone message costs one commit), and the cost of a pick with 10 and
// with queued items spread over 1,000 threads (aim: flat).
func runIngestBench(ctx context.Context, b ingestBench, stdout io.Writer) (f ingestFigures, err error) {
	if f.raw, err = bolt.RawBatchRate(ctx, filepath.Join(b.dir, "raw.db"), b.n, b.workers); err != nil {
		return f, err
	}
	if f.ingest, err = ingestRate(ctx, filepath.Join(b.dir, "ingest.db"), b.n, b.workers); err != nil {
		return f, err
	}
	fmt.Fprintf(stdout, "raw bbolt Batch:   %8.0f puts/s      (%d puts, %d writers, fsync on)\n", f.raw, b.n, b.workers)
	fmt.Fprintf(stdout, "core Ingest:       %8.0f messages/s  (%d messages over 1000 threads, %d writers)\n", f.ingest, b.n, b.workers)
	fmt.Fprintf(stdout, "ratio:             %8.2f             (aim >= 0.7)\n", f.ingest/f.raw)
	if b.paced > 0 && b.rate > 0 {
		if f.p50, f.p99, err = pacedLatency(ctx, filepath.Join(b.dir, "paced.db"), b.paced, b.rate); err != nil {
			return f, err
		}
		fmt.Fprintf(stdout, "Ingest latency at %d msg/s: p50 %6.2f ms, p99 %6.2f ms (%d messages, fsync on: until durable, when a platform is acknowledged; the run's model request does not wait for it, see BenchmarkPlatform)\n",
			b.rate, ms(f.p50), ms(f.p99), b.paced)
	}
	for _, total := range []int{10, b.queued} {
		next, whole, batch, err := pickCost(ctx, filepath.Join(b.dir, fmt.Sprintf("pick%d.db", total)), total)
		if err != nil {
			return f, err
		}
		fmt.Fprintf(stdout, "pick, %6d queued over 1000 threads: next item %6.1f µs; with its thread's %d queued items %7.1f µs\n",
			total, us(next), batch, us(whole))
	}
	return f, nil
}

// benchAgent never runs: the bench engine is not started.
type benchAgent struct{}

func (benchAgent) Execute(context.Context, *core.Job) (core.Result, error) {
	return core.Result{}, errors.New("bench agent does not run")
}

func ingestRate(ctx context.Context, path string, n, workers int) (float64, error) {
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return ingestRateOn(ctx, st, n, workers)
}

// ingestRateOn is the Ingest throughput of n messages from workers goroutines
// over 1000 threads on st, which should be empty.
func ingestRateOn(ctx context.Context, st core.Store, n, workers int) (float64, error) {
	eng, err := core.New(core.Options{Store: st, Agent: benchAgent{}, Bots: []core.BotProfile{{Handle: "chief_of_staff"}, {Handle: "engineer"}}})
	if err != nil {
		return 0, err
	}
	return ingestRateEngines(ctx, []*core.Engine{eng}, n, workers, "bench")
}

// ingestRateEngines is the Ingest throughput of n messages (dedup keys
// prefix:i) from workers goroutines over 1000 threads; writer w goes through
// engines[w mod len(engines)].
func ingestRateEngines(ctx context.Context, engines []*core.Engine, n, workers int, prefix string) (float64, error) {
	var (
		seq   atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	start := time.Now()
	for w := range workers {
		eng := engines[w%len(engines)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := seq.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				_, err := eng.Ingest(ctx, core.Inbound{
					Account: "bench/local", Platform: "bench", DedupKey: fmt.Sprintf("%s:%d", prefix, i),
					ThreadKey: fmt.Sprintf("%s:%d", prefix, i%1000), Conversation: "main",
					SenderID: "bench:user", SenderName: "user", Text: "@engineer please look at this", StartThread: true,
				})
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), ctx.Err()
}

// pacedLatency ingests n messages, one every second/rate (each on its own
// goroutine, as platform events arrive), and returns the p50 and p99 of Ingest's
// latency: the store's share of the event -> model request overhead.
func pacedLatency(ctx context.Context, path string, n, rate int) (p50, p99 time.Duration, err error) {
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	eng, err := core.New(core.Options{Store: st, Agent: benchAgent{}, Bots: []core.BotProfile{{Handle: "chief_of_staff"}, {Handle: "engineer"}}})
	if err != nil {
		return 0, 0, err
	}
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		select {
		case <-ctx.Done():
			wg.Wait()
			return 0, 0, ctx.Err()
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := eng.Ingest(ctx, core.Inbound{
				Account: "bench/local", Platform: "bench", DedupKey: fmt.Sprintf("paced:%d", i),
				ThreadKey: fmt.Sprintf("paced:%d", i%1000), Conversation: "main",
				SenderID: "bench:user", SenderName: "user", Text: "@engineer please look at this", StartThread: true,
			})
			lat[i] = time.Since(start)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	p50, p99 = percentiles(lat)
	return p50, p99, nil
}

// percentiles sorts d and returns its p50 and p99 (d must not be empty): the
// one convention of every latency figure the bench prints.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	n := len(d)
	return d[n/2], d[min(n-1, n*99/100)]
}

// pickCost fills a store with total queued items over 1000 threads of 10 bots and
// times the reads a pick makes: the bot's oldest queued item (next), and that plus
// its thread's whole queue (whole), which grows with the batch coalesced (batch).
func pickCost(ctx context.Context, path string, total int) (next, whole time.Duration, batch int, err error) {
	st, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		return 0, 0, 0, err
	}
	defer st.Close()
	return pickCostOn(ctx, st, total, 0)
}

// pickCostOn is pickCost on st, which should be empty, with history completed
// items of the same bots and threads stored before the queued ones (the past
// a queue builds up behind).
func pickCostOn(ctx context.Context, st core.Store, total, history int) (next, whole time.Duration, batch int, err error) {
	const threads, bots, chunk = 1000, 10, 10000
	var ths []core.ThreadID
	for done := 0; done < history+total; done += chunk {
		err := st.Update(ctx, func(tx core.Tx) error {
			for len(ths) < min(threads, history+total) {
				t, err := tx.PutThread(core.Thread{Key: fmt.Sprint(len(ths))})
				if err != nil {
					return err
				}
				ths = append(ths, t.ID)
			}
			for i := done; i < min(done+chunk, history+total); i++ {
				status := core.ItemQueued
				if i < history {
					status = core.ItemDone
				}
				_, err := tx.PutItem(core.InboxItem{Actor: core.ActorID(fmt.Sprintf("bot:b%d", i%bots)), Thread: ths[i%len(ths)],
					Kind: core.ItemMessage, Message: core.MessageID(i + 1), Status: status})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, 0, 0, err
		}
	}
	const rounds = 2000
	for _, withThread := range []bool{false, true} {
		start := time.Now()
		for i := range rounds {
			bot := core.ActorID(fmt.Sprintf("bot:b%d", i%bots))
			err := st.View(ctx, func(tx core.ReadTx) error {
				it, err := tx.NextQueued(bot, func(core.InboxItem) bool { return false })
				if err != nil || !withThread {
					return err
				}
				q, err := tx.QueuedInThread(bot, it.Thread)
				batch = len(q)
				return err
			})
			if err != nil {
				return 0, 0, 0, err
			}
		}
		if withThread {
			whole = time.Since(start) / rounds
		} else {
			next = time.Since(start) / rounds
		}
	}
	return next, whole, batch, nil
}
