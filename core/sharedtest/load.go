package sharedtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// Fairness and leases under load: several engines on one store keep sharing
// the work and keep their claims while the store is busy.

// ownerIndex maps a run's claim owner to its engine's index (-1: none).
func (x *sharedRig) ownerIndex(owner string) int {
	return slices.IndexFunc(x.engines, func(e *core.Engine) bool { return e.ClaimOwner() == owner })
}

// testFairShare: three engines with room for 8 runs each, one bot allowed 24
// threads at once, and a backlog of 120 threads all ingested through the first
// engine, as when one process holds the platforms' ingress. The first runs
// wait until 24 run at once, which happens only if every engine takes its
// part (none hoards the work past its own limit, and the others are woken for
// work another process ingested), and until the whole backlog is stored; then
// every run proceeds, and the engines drain the backlog together. Each engine
// runs at least its slots' worth, and every message is answered once.
func testFairShare(t *testing.T, open Opener) {
	const engines, perEngine, threads = 3, 8, 120
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: engines * perEngine}}
	x := newSharedRig(t, open, engines, bots, 2*time.Second)
	var (
		mu      sync.Mutex
		byOwner = map[string]int{}
		running int
		full    = make(chan struct{}) // closed once engines*perEngine runs ran at once
		once    sync.Once
		gate    = make(chan struct{}) // closed once full and the backlog is stored
	)
	x.agent.meter = func(ctx context.Context, job *core.Job) error {
		mu.Lock()
		byOwner[job.Run.Owner]++
		running++
		if running == engines*perEngine {
			once.Do(func() { close(full) })
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for c := range threads {
		x.say(0, fmt.Sprintf("f%d", c), fmt.Sprintf("message of f%d", c))
	}
	select {
	case <-full:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("never %d runs at once across the engines; runs started by owner: %v", engines*perEngine, byOwner)
	}
	close(gate)
	for i := range engines {
		x.idle(i)
	}
	mu.Lock()
	defer mu.Unlock()
	total, share := 0, make([]int, engines)
	for owner, n := range byOwner {
		total += n
		if i := x.ownerIndex(owner); i >= 0 {
			share[i] += n
		} else {
			t.Errorf("%d runs owned by %q, no engine", n, owner)
		}
	}
	t.Logf("runs by engine, all ingested through p1: %v of %d", share, total)
	// After the gate the runs end at once and the backlog goes to whichever
	// engine picks fastest, which on a loaded machine says more about its CPU
	// share than about fairness; what no engine may lack is its slots' worth
	// while work waited.
	for i, n := range share {
		if n < perEngine {
			t.Errorf("engine p%d ran %d of %d runs, want at least its %d slots' worth", i+1, n, total, perEngine)
		}
	}
	for id, n := range x.deliveredByMessage() {
		if n != 1 {
			t.Errorf("message %d: its answer was delivered %d times, want once", id, n)
		}
	}
	if answers, _ := x.answers(); answers != threads {
		t.Errorf("%d answers delivered, want %d", answers, threads)
	}
}

// LongWrite opens a write transaction in a session of its own (another
// process's handle on the store), makes one write in it, calls opened, and
// keeps it open until release is closed; it returns the transaction's error.
type LongWrite func(ctx context.Context, opened func(), release <-chan struct{}) error

// LeasesSurviveLongTransaction: two engines on a store that other sessions
// write to concurrently (PostgreSQL). The first holds a lease (an account's
// ingress) and runs a run that waits; messages keep arriving through both.
// Another session (long) then holds a write transaction open for three lease
// TTLs. Throughout, the first engine keeps its lease and its run's claim (it is
// not taken over and does not restart), the other work keeps being answered
// while the transaction is open, and afterwards every message is answered once.
func LeasesSurviveLongTransaction(t *testing.T, open Opener, long LongWrite) {
	leasesUnderLoad(t, open, long)
}

// testLeasesRenewUnderLoad is LeasesSurviveLongTransaction without the long
// transaction: the load alone, for three lease TTLs.
func testLeasesRenewUnderLoad(t *testing.T, open Opener) { leasesUnderLoad(t, open, nil) }

// leasesUnderLoad is LeasesSurviveLongTransaction; long may be nil (no long
// transaction).
func leasesUnderLoad(t *testing.T, open Opener, long LongWrite) {
	const ttl = 1500 * time.Millisecond
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: 8}}
	x := newSharedRig(t, open, 2, bots, ttl)

	// The lease: held by the first engine for the whole test.
	leaseLost := make(chan error, 1)
	held := make(chan struct{})
	var heldOnce sync.Once
	hctx, hcancel := context.WithCancel(context.Background())
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		_ = x.engines[0].HoldLease(hctx, core.LeaseKeyIngress("console/long"), func(ctx context.Context) error {
			heldOnce.Do(func() { close(held) })
			<-ctx.Done()
			if hctx.Err() == nil {
				select {
				case leaseLost <- context.Cause(ctx):
				default: // lost before: the first loss is reported
				}
			}
			return nil
		}, nil)
	}()
	defer func() { hcancel(); <-hdone }()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first engine never took the lease")
	}

	// The run: the first one waits until released.
	releaseRun := make(chan struct{})
	started := make(chan core.Run, 1)
	var first atomic.Bool
	x.agent.meter = func(ctx context.Context, job *core.Job) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		started <- job.Run
		select {
		case <-releaseRun:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	x.say(0, "long0", "the waiting run")
	var waiting core.Run
	select {
	case waiting = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no run started")
	}

	// The load: a message every few milliseconds through either engine.
	stopLoad := make(chan struct{})
	var loadDone sync.WaitGroup
	var sent atomic.Int64
	var stopOnce sync.Once
	endLoad := func() { stopOnce.Do(func() { close(stopLoad) }); loadDone.Wait() }
	defer endLoad() // also when the test fails early: the load reports to t
	loadDone.Add(1)
	go func() {
		defer loadDone.Done()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-time.After(5 * time.Millisecond): // load pacing, not ordering
			}
			if err := x.tell(context.Background(), i%2, fmt.Sprintf("load%d", i%40), fmt.Sprintf("load %d", i)); err != nil {
				t.Error(err)
				return
			}
			sent.Add(1)
		}
	}()

	// The long transaction, open for three lease TTLs.
	release := make(chan struct{})
	longErr := make(chan error, 1)
	if long == nil {
		longErr <- nil
	} else {
		opened := make(chan struct{})
		go func() { longErr <- long(context.Background(), func() { close(opened) }, release) }()
		select {
		case <-opened:
		case err := <-longErr:
			t.Fatalf("the long transaction: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the long transaction never opened")
		}
	}
	answeredBefore, _ := x.answers()
	time.Sleep(3 * ttl) // the scenario's duration: leases not renewed in it would lapse
	answeredDuring, _ := x.answers()
	close(release)
	if err := <-longErr; err != nil {
		t.Errorf("the long transaction: %v", err)
	}

	endLoad()
	select {
	case err := <-leaseLost:
		t.Errorf("the first engine lost its lease under load (another session's transaction open: %v): %v", long != nil, err)
	default:
	}
	if answeredDuring == answeredBefore {
		t.Errorf("no answer was delivered in %s under load (another session's transaction open: %v; %d messages sent in all)", 3*ttl, long != nil, sent.Load())
	}
	x.view(func(tx core.ReadTx) error {
		r, err := tx.Run(waiting.ID)
		if err != nil {
			return err
		}
		if r.Owner != waiting.Owner || r.Restarts != 0 || r.Status != core.RunRunning {
			t.Errorf("the waiting run is %s, owner %q, %d restarts; want still running under %q", r.Status, r.Owner, r.Restarts, waiting.Owner)
		}
		return nil
	})
	close(releaseRun)
	x.idle(0)
	x.idle(1)
	answers, _ := x.answers()
	t.Logf("%d load messages; %d answers, %d of them in the %s measured", sent.Load(), answers, answeredDuring-answeredBefore, 3*ttl)
	delivered := x.deliveredByMessage()
	x.view(func(tx core.ReadTx) error {
		ms, err := tx.MessagesSince(0, 0)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Sender == "console:you" && delivered[m.ID] != 1 {
				t.Errorf("message %d %q: its answer was delivered %d times, want once", m.ID, m.Text, delivered[m.ID])
			}
		}
		runs, err := tx.RunsByStatus(core.RunRunning)
		if len(runs) > 0 {
			t.Errorf("%d runs still running after every engine is idle", len(runs))
		}
		return err
	})
}

// deliveredByMessage counts, per human message, the delivered answers that
// cover it ("run N answers id,id,...").
func (x *sharedRig) deliveredByMessage() map[core.MessageID]int {
	delivered := map[core.MessageID]int{}
	for _, d := range x.ad.deliveries() {
		var run int
		var ids string
		if _, err := fmt.Sscanf(d.Text, "run %d answers %s", &run, &ids); err != nil {
			continue
		}
		for _, id := range strings.Split(ids, ",") {
			var n uint64
			if _, err := fmt.Sscan(id, &n); err == nil {
				delivered[core.MessageID(n)]++
			}
		}
	}
	return delivered
}
