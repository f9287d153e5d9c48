package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
	"openbot/store/bolt"
)

// Shared mode (DESIGN.md §7, core/lease.go, core/shared.go): several engines,
// each standing for one process, on one store. The store here is one bbolt
// handle the engines share (PostgreSQL's tests run the real binary several
// times on one database, e2e/); what is tested is the engines' claims.

// hintBus is an in-memory core.Hinter: every hint reaches every listener.
type hintBus struct {
	mu   sync.Mutex
	subs []chan string
}

func (b *hintBus) Hint(ctx context.Context, payload string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.subs {
		select {
		case c <- payload:
		default: // a slow listener loses hints; the sweep is the truth
		}
	}
	return nil
}

func (b *hintBus) ListenHints(ctx context.Context, fn func(string)) error {
	c := make(chan string, 256)
	b.mu.Lock()
	b.subs = append(b.subs, c)
	b.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-c:
			fn(p)
		}
	}
}

// deadStore stands for a process's connection to the store after SIGKILL:
// once dead, every call fails, so the process neither renews nor settles.
type deadStore struct {
	core.Store
	dead atomic.Bool
}

var errDead = errors.New("process killed")

func (s *deadStore) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.View(ctx, fn)
}

func (s *deadStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Update(ctx, fn)
}

func (s *deadStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Batch(ctx, fn)
}

// Close leaves the shared handle open: the test closes it.
func (s *deadStore) Close() error { return nil }

// concurrencyAgent answers every run after a short random pause and records
// the runs in flight per (bot, thread) and per bot, across every engine it
// serves, and which triggers each answer covered.
type concurrencyAgent struct {
	mu       sync.Mutex
	inThread map[string]int
	inBot    map[string]int
	maxBot   map[string]int
	overlaps []string
	answered map[core.MessageID]int
	block    func(job *core.Job) bool // true: wait until ctx ends (a hung process)
}

func newConcurrencyAgent() *concurrencyAgent {
	return &concurrencyAgent{inThread: map[string]int{}, inBot: map[string]int{}, maxBot: map[string]int{}, answered: map[core.MessageID]int{}}
}

func (a *concurrencyAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	key := fmt.Sprint(job.Bot.Handle, "/", job.Thread.ID)
	a.mu.Lock()
	a.inThread[key]++
	if a.inThread[key] > 1 {
		a.overlaps = append(a.overlaps, key)
	}
	a.inBot[job.Bot.Handle]++
	a.maxBot[job.Bot.Handle] = max(a.maxBot[job.Bot.Handle], a.inBot[job.Bot.Handle])
	block := a.block != nil && a.block(job)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inThread[key]--
		a.inBot[job.Bot.Handle]--
		a.mu.Unlock()
	}()
	if block {
		<-ctx.Done()
		return core.Result{}, ctx.Err()
	}
	select {
	case <-time.After(time.Duration(rand.IntN(4)) * time.Millisecond):
	case <-ctx.Done():
		return core.Result{}, ctx.Err()
	}
	var ids []string
	a.mu.Lock()
	for _, m := range job.Triggers {
		a.answered[m.ID]++
		ids = append(ids, fmt.Sprint(m.ID))
	}
	a.mu.Unlock()
	return core.Result{Reply: fmt.Sprintf("run %d answers %s", job.Run.ID, strings.Join(ids, ",")), Usage: core.Usage{ModelCalls: 1}}, nil
}

// sharedRig runs n engines on one bbolt store.
type sharedRig struct {
	t       *testing.T
	store   *bolt.Store
	bus     *hintBus
	agent   *concurrencyAgent
	ad      *recAdapter
	engines []*core.Engine
	stores  []*deadStore
	cancels []context.CancelFunc
	dones   []chan error
	seq     atomic.Int64
}

func newSharedRig(t *testing.T, n int, bots []core.BotProfile, ttl time.Duration) *sharedRig {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := &sharedRig{t: t, store: st, bus: &hintBus{}, agent: newConcurrencyAgent(), ad: &recAdapter{id: "console/local", bot: "*"}}
	for i := range n {
		ds := &deadStore{Store: st}
		eng, err := core.New(core.Options{Store: ds, Agent: x.agent, Bots: bots, ShutdownGrace: 2 * time.Second,
			Limits: core.Limits{MaxConcurrentRuns: 8}, Shared: true, ProcessID: fmt.Sprintf("p%d", i+1),
			LeaseTTL: ttl, Hints: x.bus, SweepInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.AddAdapter(x.ad); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		x.engines, x.stores, x.cancels, x.dones = append(x.engines, eng), append(x.stores, ds), append(x.cancels, cancel), append(x.dones, done)
	}
	t.Cleanup(func() {
		for i := range x.engines {
			x.stop(i)
		}
		_ = st.Close()
	})
	for _, e := range x.engines {
		<-e.Ready()
	}
	return x
}

func (x *sharedRig) stop(i int) {
	if x.cancels[i] == nil {
		return
	}
	x.cancels[i]()
	x.cancels[i] = nil
	select {
	case err := <-x.dones[i]:
		if err != nil && !x.stores[i].dead.Load() {
			x.t.Errorf("engine %d Run: %v", i, err)
		}
	case <-time.After(15 * time.Second):
		x.t.Errorf("engine %d did not stop", i)
	}
}

// say ingests a message into conversation conv through engine i.
func (x *sharedRig) say(i int, conv, text string) {
	x.t.Helper()
	n := x.seq.Add(1)
	in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", n),
		ThreadKey: "console:" + conv, Conversation: core.ConversationRef(conv), PlatformID: fmt.Sprintf("in%d", n),
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}
	if _, err := x.engines[i].Ingest(context.Background(), in); err != nil {
		x.t.Fatalf("ingest through engine %d: %v", i, err)
	}
}

// idle waits until every live engine sees nothing in flight.
func (x *sharedRig) idle(live int) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := x.engines[live].WaitIdle(ctx); err != nil {
		x.t.Fatalf("WaitIdle: %v", err)
	}
}

func (x *sharedRig) view(fn func(tx core.ReadTx) error) {
	x.t.Helper()
	if err := x.store.View(context.Background(), fn); err != nil {
		x.t.Fatal(err)
	}
}

// TestSharedEnginesAnswerEachMessageOnce: three engines on one store take a
// stream of messages over many threads and two bots, each message ingested
// through a random engine. Every human message is a trigger of exactly one
// completed run, no bot ever runs two runs in one thread, a bot's
// max_parallel_threads holds across the engines, every reply is delivered once,
// and each conversation's replies arrive in the order they were stored.
func TestSharedEnginesAnswerEachMessageOnce(t *testing.T) {
	bots := []core.BotProfile{
		{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: 3},
		{Handle: "engineer", Name: "Engineer", MaxParallelThreads: 2},
	}
	x := newSharedRig(t, 3, bots, 2*time.Second)
	const threads, perThread = 24, 4
	var wg sync.WaitGroup
	for c := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perThread {
				text := fmt.Sprintf("message %d of c%d", k, c)
				if c%2 == 1 {
					text = "@engineer " + text
				}
				x.say(rand.IntN(3), fmt.Sprintf("c%d", c), text)
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	x.idle(0)

	x.agent.mu.Lock()
	overlaps, maxBot, answered := x.agent.overlaps, x.agent.maxBot, x.agent.answered
	x.agent.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("a bot ran two runs at once in one thread: %v", overlaps)
	}
	if maxBot["chief_of_staff"] > 3 || maxBot["engineer"] > 2 {
		t.Errorf("max_parallel_threads broken across engines: %v (limits 3 and 2)", maxBot)
	}
	owners := map[string]int{}
	x.view(func(tx core.ReadTx) error {
		ms, err := tx.MessagesSince(0, 0)
		if err != nil {
			return err
		}
		humans := 0
		for _, m := range ms {
			if m.Sender != "console:you" {
				continue
			}
			humans++
			if answered[m.ID] != 1 {
				t.Errorf("message %d %q answered %d times, want once", m.ID, m.Text, answered[m.ID])
			}
		}
		if humans != threads*perThread {
			t.Errorf("%d human messages stored, want %d", humans, threads*perThread)
		}
		runs, err := tx.RunsBefore(0, 0)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Status != core.RunCompleted {
				t.Errorf("run %d is %s, want completed", r.ID, r.Status)
			}
			if r.Owner != "" {
				t.Errorf("settled run %d still names owner %q", r.ID, r.Owner)
			}
		}
		// Per conversation, deliveries follow the stored order of bot messages.
		threadsList, err := tx.Threads(0)
		if err != nil {
			return err
		}
		byConv := map[core.ConversationRef][]core.Delivery{}
		for _, d := range x.ad.deliveries() {
			byConv[d.Conversation] = append(byConv[d.Conversation], d)
		}
		for _, th := range threadsList {
			ms, err := tx.Messages(th.ID, 0, 0)
			if err != nil {
				return err
			}
			var want, got []string
			for _, m := range ms {
				if m.Sender != "console:you" {
					want = append(want, m.Text)
				}
			}
			conv := th.Bindings[0].Conversation
			for _, d := range byConv[conv] {
				got = append(got, d.Text)
			}
			if !slices.Equal(got, want) {
				t.Errorf("conversation %s: delivered %q, stored %q", conv, got, want)
			}
		}
		ls, err := tx.Leases("")
		for _, l := range ls {
			owners[l.Owner]++
		}
		return err
	})
	t.Logf("lane leases by process after the run: %v", owners)
}

// TestSharedEngineKilledMidRunIsRecovered: the engine running a run "dies"
// (its store calls fail from then on, so it neither renews its claim nor
// settles). Once the claim lapses another engine recovers the run as a
// restart would, under the same run id, and answers the message once; the
// dead engine's late result is never stored.
func TestSharedEngineKilledMidRunIsRecovered(t *testing.T) {
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}}
	x := newSharedRig(t, 2, bots, 600*time.Millisecond)
	started := make(chan string, 4)
	var first atomic.Bool
	x.agent.block = func(job *core.Job) bool {
		if first.CompareAndSwap(false, true) {
			started <- job.Run.Owner
			return true // the first run hangs in its process until that process is gone
		}
		return false
	}
	x.say(0, "k1", "hello")
	var owner string
	select {
	case owner = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no run started")
	}
	victim := slices.IndexFunc(x.engines, func(e *core.Engine) bool { return e.ProcessID() == owner })
	if victim < 0 {
		t.Fatalf("run owner %q is no engine", owner)
	}
	survivor := 1 - victim
	x.stores[victim].dead.Store(true) // SIGKILL: nothing it does reaches the store any more
	x.idle(survivor)
	x.stop(victim) // its hung run ends; its settle cannot land

	x.view(func(tx core.ReadTx) error {
		runs, err := tx.RunsBefore(0, 0)
		if err != nil {
			return err
		}
		if len(runs) != 1 {
			t.Fatalf("%d runs, want the one recovered run", len(runs))
		}
		r := runs[0]
		if r.Status != core.RunCompleted || r.Restarts != 1 {
			t.Errorf("run %d: %s with %d restarts, want completed after 1 restart", r.ID, r.Status, r.Restarts)
		}
		return nil
	})
	texts := x.ad.texts()
	answers := 0
	for _, s := range texts {
		if strings.Contains(s, "answers") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("delivered %q, want exactly one answer", texts)
	}
}
