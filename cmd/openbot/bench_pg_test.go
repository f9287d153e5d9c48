package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"openbot/core"
	"openbot/store/bolt"
	"openbot/store/postgres"
)

// pgBench is what BenchmarkPostgres measures on PostgreSQL, side by side with
// bbolt (DESIGN.md §7, seed G8).
type pgBench struct {
	dsn         string
	n, workers  int
	queued      int // queued items of the large pick measurement
	processes   int // the shared measurement runs 1..processes engines sharing the database
	paced, rate int
	dir         string

	prefix string                        // scratch schemas are <prefix>_<what>
	drops  []func(context.Context) error // drop the scratch schemas
}

// runPGBench prints, each PostgreSQL measurement in a scratch schema of the
// database that it drops at the end: the cost of a pick with 100 queued items,
// and with b.queued behind as many done ones (aim: flat); then one table of
// the shared measurement (sharedFigures) for bbolt with one engine and for
// 1..b.processes engines sharing the database (each with its own store handle,
// Options.Shared, hints through the store): Ingest throughput at b.workers
// writers and the event -> model request latency of paced messages at b.rate,
// each beside its ratio to one PostgreSQL engine and to bbolt. It returns the
// table's rows, bbolt's first.
func runPGBench(ctx context.Context, b *pgBench, stdout io.Writer) (rows []sharedResult, err error) {
	b.prefix = fmt.Sprintf("openbot_bench_%d", os.Getpid())
	defer func() {
		for _, drop := range b.drops {
			if derr := drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	for i, total := range []int{100, b.queued} {
		dsn, err := b.scratch(ctx, fmt.Sprintf("pick%d_%d", i, total))
		if err != nil {
			return nil, err
		}
		st, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 4})
		if err != nil {
			return nil, err
		}
		history := 0
		if total > 100 {
			history = total
		}
		next, whole, batch, err := pickCostOn(ctx, st, total, history)
		_ = st.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "pick, PostgreSQL, %6d queued over 1000 threads, %6d done before: next item %6.1f µs; with its thread's %d queued items %7.1f µs\n",
			total, history, us(next), batch, us(whole))
	}

	bst, err := bolt.Open(filepath.Join(b.dir, "shared.db"), bolt.Options{})
	if err != nil {
		return nil, err
	}
	f, err := sharedFigures(ctx, []core.Store{bst}, false, b)
	_ = bst.Close()
	if err != nil {
		return nil, err
	}
	f.label = "bbolt, 1 engine"
	rows = append(rows, f)
	for procs := 1; procs <= b.processes; procs++ {
		f, err := b.sharedOnPG(ctx, procs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, f)
	}
	printShared(stdout, rows, b)
	return rows, nil
}

// sharedOnPG is sharedFigures for procs engines, each with its own store
// handle on one scratch schema.
func (b *pgBench) sharedOnPG(ctx context.Context, procs int) (sharedResult, error) {
	dsn, err := b.scratch(ctx, "shared"+strconv.Itoa(procs))
	if err != nil {
		return sharedResult{}, err
	}
	stores := make([]core.Store, procs)
	for i := range stores {
		st, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 16})
		if err != nil {
			return sharedResult{}, err
		}
		defer st.Close()
		stores[i] = st
	}
	f, err := sharedFigures(ctx, stores, true, b)
	f.label = fmt.Sprintf("PostgreSQL, %d %s", procs, plural(procs, "engine", "engines"))
	return f, err
}

// scratch creates the scratch schema <prefix>_<what> and returns its DSN.
func (b *pgBench) scratch(ctx context.Context, what string) (string, error) {
	dsn, drop, err := postgres.ScratchSchema(ctx, b.dsn, b.prefix+"_"+what)
	if err != nil {
		return "", err
	}
	b.drops = append(b.drops, drop)
	return dsn, nil
}

// printShared prints rows (bbolt's first, then PostgreSQL's from one engine up)
// as one table: each figure, then its ratio to one PostgreSQL engine's and to
// bbolt's (throughput: higher is better; latency: lower is better).
func printShared(w io.Writer, rows []sharedResult, b *pgBench) {
	fmt.Fprintf(w, "Ingest with %d writers; event -> model request of %d messages at %d msg/s:\n", b.workers, b.paced, b.rate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tingest msg/s\t×1 engine\t×bbolt\tp50 ms\tp99 ms\tp50/p99 ×1 engine\tp50/p99 ×bbolt\treached\t")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	bb := rows[0]
	var one sharedResult // PostgreSQL's first row
	if len(rows) > 1 {
		one = rows[1]
	}
	for i, f := range rows {
		vsOne, latOne := "-", "-"
		if i > 0 {
			vsOne = ratio(f.ingest, one.ingest)
			latOne = ratio(ms(f.p50), ms(one.p50)) + "/" + ratio(ms(f.p99), ms(one.p99))
		}
		fmt.Fprintf(tw, "%-21s\t%.0f\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d/%d\t\n", f.label, f.ingest, vsOne, ratio(f.ingest, bb.ingest),
			ms(f.p50), ms(f.p99), latOne, ratio(ms(f.p50), ms(bb.p50))+"/"+ratio(ms(f.p99), ms(bb.p99)), f.answered, b.paced)
	}
	_ = tw.Flush()
}

// sharedResult are the figures of one sharedFigures measurement.
type sharedResult struct {
	label    string  // what ran: "bbolt, 1 engine", "PostgreSQL, 3 engines"
	ingest   float64 // Ingest messages/s, engines not running
	p50, p99 time.Duration
	answered int // paced messages that reached the model
}

// benchMarkerAgent records when each paced message (text "bench-<i>") first
// reaches the model, across every engine of a measurement.
type benchMarkerAgent struct {
	at    []atomic.Int64 // unix ns, 0 until reached
	count atomic.Int64
	all   chan struct{} // closed when every message arrived
	once  sync.Once
}

func (a *benchMarkerAgent) Execute(_ context.Context, job *core.Job) (core.Result, error) {
	now := time.Now().UnixNano()
	for _, m := range job.Triggers {
		sub := benchMarker.FindStringSubmatch(m.Text)
		if sub == nil {
			continue
		}
		i, err := strconv.Atoi(sub[1])
		if err != nil || i < 0 || i >= len(a.at) || !a.at[i].CompareAndSwap(0, now) {
			continue
		}
		if a.count.Add(1) == int64(len(a.at)) {
			a.once.Do(func() { close(a.all) })
		}
	}
	return core.Result{}, nil
}

// sharedFigures runs one engine per store (Shared and hinting through the
// store when shared), sends b.paced messages at b.rate, each in its own
// thread and through engine i mod len(stores), and measures from before
// Ingest to the model request; then, with fresh engines that do not run, the
// Ingest throughput of b.n messages from b.workers goroutines spread over the
// engines.
func sharedFigures(ctx context.Context, stores []core.Store, sharedStore bool, b *pgBench) (sharedResult, error) {
	var f sharedResult
	bots := []core.BotProfile{{Handle: "chief_of_staff"}, {Handle: "engineer", MaxParallelThreads: 64}}
	agent := &benchMarkerAgent{at: make([]atomic.Int64, max(0, b.paced)), all: make(chan struct{})}
	if len(agent.at) == 0 {
		close(agent.all) // --paced 0: no latency measurement
	}
	engines := make([]*core.Engine, len(stores))
	for i, st := range stores {
		opts := core.Options{Store: st, Agent: agent, Bots: bots, Limits: core.Limits{MaxConcurrentRuns: 64},
			ShutdownGrace: 5 * time.Second}
		if sharedStore {
			opts.Shared, opts.ProcessID = true, fmt.Sprintf("bench-%d", i)
			opts.Hints, _ = st.(core.Hinter)
		}
		e, err := core.New(opts)
		if err != nil {
			return f, err
		}
		engines[i] = e
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErrs := make(chan error, len(engines))
	for _, e := range engines {
		wg.Add(1)
		go func() { defer wg.Done(); runErrs <- e.Run(rctx) }()
	}
	defer func() { stop(); wg.Wait() }()
	for _, e := range engines {
		select {
		case <-e.Ready():
		case err := <-runErrs:
			return f, fmt.Errorf("engine stopped before ready: %v", err)
		case <-ctx.Done():
			return f, ctx.Err()
		}
	}
	start := make([]time.Time, b.paced)
	tick := time.NewTicker(time.Second / time.Duration(max(1, b.rate)))
	errs := make(chan error, b.paced)
	var sends sync.WaitGroup
	for i := range b.paced {
		select {
		case <-ctx.Done():
			sends.Wait()
			return f, ctx.Err()
		case <-tick.C:
		}
		sends.Add(1)
		start[i] = time.Now()
		go func() {
			defer sends.Done()
			_, err := engines[i%len(engines)].Ingest(ctx, core.Inbound{
				Account: "bench/local", Platform: "bench", DedupKey: fmt.Sprintf("e2e:%d", i),
				ThreadKey: fmt.Sprintf("e2e:%d", i), Conversation: "main", SenderID: "bench:user",
				SenderName: "user", Text: fmt.Sprintf("@engineer bench-%d", i), StartThread: true,
			})
			errs <- err
		}()
	}
	tick.Stop()
	sends.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return f, err
		}
	}
	// Generous: messages that never reach the model are counted, not waited for.
	select {
	case <-agent.all:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
		return f, ctx.Err()
	}
	var lat []time.Duration
	for i := range agent.at {
		if at := agent.at[i].Load(); at != 0 {
			lat = append(lat, time.Unix(0, at).Sub(start[i]))
		}
	}
	f.answered = len(lat)
	if len(lat) > 0 {
		f.p50, f.p99 = percentiles(lat)
	}
	stop()
	wg.Wait()

	idle := make([]*core.Engine, len(stores))
	for i, st := range stores {
		opts := core.Options{Store: st, Agent: benchAgent{}, Bots: bots}
		if sharedStore {
			opts.Shared, opts.ProcessID = true, fmt.Sprintf("bench-ingest-%d", i)
			opts.Hints, _ = st.(core.Hinter)
		}
		var err error
		if idle[i], err = core.New(opts); err != nil {
			return f, err
		}
	}
	var err error
	f.ingest, err = ingestRateEngines(ctx, idle, b.n, b.workers, "shared")
	return f, err
}
