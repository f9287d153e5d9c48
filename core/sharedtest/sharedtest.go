package sharedtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// Package sharedtest is the conformance suite of shared mode (DESIGN.md §7,
// core/lease.go, core/shared.go): several engines, each standing for one
// openbot process, on one store. A store that several processes may share runs
// it with one handle per engine (store/postgres); bbolt runs it with one handle
// the engines share (core). Use:
//
//	sharedtest.Run(t, func(t *testing.T) sharedtest.Open { ... })

// HintBus is an in-memory core.Hinter for engines of one test process: every
// hint reaches every listener.
type HintBus struct {
	mu   sync.Mutex
	subs []chan string
}

func (b *HintBus) Hint(ctx context.Context, payload string) error {
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

func (b *HintBus) ListenHints(ctx context.Context, fn func(string)) error {
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

// FaultStore is one process's handle on the store, with the faults a process
// meets: Kill (SIGKILL: every later call fails, so it neither renews nor
// settles) and Stall (cut off from the database: calls hang). Close leaves
// the handle open for the test to close.
type FaultStore struct {
	core.Store
	dead atomic.Bool
	// stalled, while non-nil and open, makes every call wait (a process cut
	// off from its database): until it is closed, or the call's ctx ends.
	mu      sync.Mutex
	stalled chan struct{}
}

var errDead = errors.New("process killed")

// Kill makes every later call fail, as after SIGKILL.
func (s *FaultStore) Kill() { s.dead.Store(true) }

// Stall cuts the process off from the store until the returned func is called.
func (s *FaultStore) Stall() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.stalled = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.stalled = nil
		s.mu.Unlock()
		close(ch)
	}
}

func (s *FaultStore) gate(ctx context.Context) error {
	if s.dead.Load() {
		return errDead
	}
	s.mu.Lock()
	ch := s.stalled
	s.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *FaultStore) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if err := s.gate(ctx); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}

func (s *FaultStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.gate(ctx); err != nil {
		return err
	}
	return s.Store.Update(ctx, fn)
}

func (s *FaultStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if err := s.gate(ctx); err != nil {
		return err
	}
	return s.Store.Batch(ctx, fn)
}

// Close leaves the handle open: the suite closes it.
func (s *FaultStore) Close() error { return nil }

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
	// onBlockEnd, when set, is called when a blocked run's ctx ended.
	onBlockEnd func()
	// pause, when set and returning true, decides the whole result (questions).
	pause   func(job *core.Job) (core.Result, bool)
	resumed []string // decisions the resumed runs were handed, in order
	// meter, when set, runs first in each run; its error ends the run.
	meter func(ctx context.Context, job *core.Job) error
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
	pause, meter := a.pause, a.meter
	if job.Resume != nil {
		a.resumed = append(a.resumed, job.Resume.Decision())
	}
	a.mu.Unlock()
	if pause != nil {
		if res, ok := pause(job); ok {
			return res, nil // the deferred count below still runs
		}
	}
	defer func() {
		a.mu.Lock()
		a.inThread[key]--
		a.inBot[job.Bot.Handle]--
		a.mu.Unlock()
	}()
	if meter != nil {
		if err := meter(ctx, job); err != nil {
			return core.Result{}, err
		}
	}
	if block {
		<-ctx.Done()
		a.mu.Lock()
		end := a.onBlockEnd
		a.mu.Unlock()
		if end != nil {
			end()
		}
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

// Opener returns one engine's handle on the shared store, and the hints it
// uses (nil: the sweep alone). The suite closes each handle after its engine
// stopped; handles of one store may be the same value if Close of it is
// harmless until the test ends.
type Opener func(t *testing.T) (core.Store, core.Hinter)

// Run runs the suite; open is called once per engine of each test, all on the
// same store (a fresh one per test: the caller's open decides, per t).
func Run(t *testing.T, open func(t *testing.T) Opener) {
	t.Run("AnswerEachMessageOnce", func(t *testing.T) { testAnswerEachMessageOnce(t, open(t)) })
	t.Run("KilledMidRunIsRecovered", func(t *testing.T) { testKilledMidRunIsRecovered(t, open(t)) })
	t.Run("FirstAnswerWins", func(t *testing.T) { testFirstAnswerWins(t, open(t)) })
	t.Run("BudgetHoldsAcrossEngines", func(t *testing.T) { testBudgetHoldsAcrossEngines(t, open(t)) })
	t.Run("CutOffProcessStopsBeforeTakeover", func(t *testing.T) { testCutOffProcessStopsBeforeTakeover(t, open(t)) })
	t.Run("FairShare", func(t *testing.T) { testFairShare(t, open(t)) })
	t.Run("LeasesRenewUnderLoad", func(t *testing.T) { testLeasesRenewUnderLoad(t, open(t)) })
	t.Run("SameMessageAtOnce", func(t *testing.T) { testSameMessageAtOnce(t, open(t)) })
	t.Run("PickSameQueueAtOnce", func(t *testing.T) { testPickSameQueueAtOnce(t, open(t)) })
	t.Run("SettleRacesCancel", func(t *testing.T) { testSettleRacesCancel(t, open(t)) })
}

// testWriter sends an engine's log lines to the test's log.
type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, strings.TrimSpace(string(p)))
	return len(p), nil
}

// recorder is the account every engine delivers through: deliveries of all
// processes, in the order the platform got them.
type recorder struct {
	mu  sync.Mutex
	got []core.Delivery
	n   int
	// notice, when set, is called with each delivery's text (under mu).
	notice func(text string)
}

func (r *recorder) Account() core.AccountID { return "console/local" }
func (r *recorder) Bot() string             { return "*" }
func (r *recorder) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.got = append(r.got, d)
	if r.notice != nil {
		r.notice(d.Text)
	}
	return fmt.Sprintf("p%d", r.n), nil
}

func (r *recorder) deliveries() []core.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Delivery(nil), r.got...)
}

// sharedRig runs n engines on one store.
type sharedRig struct {
	t       *testing.T
	store   core.Store // the first engine's handle, for the test's reads
	agent   *concurrencyAgent
	ad      *recorder
	engines []*core.Engine
	stores  []*FaultStore
	cancels []context.CancelFunc
	dones   []chan error
	seq     atomic.Int64
}

func newSharedRig(t *testing.T, open Opener, n int, bots []core.BotProfile, ttl time.Duration) *sharedRig {
	t.Helper()
	return newSharedRigCost(t, open, n, bots, ttl, nil)
}

// newSharedRigCost is newSharedRig with cost control.
func newSharedRigCost(t *testing.T, open Opener, n int, bots []core.BotProfile, ttl time.Duration, cost *core.Cost) *sharedRig {
	t.Helper()
	x := &sharedRig{t: t, agent: newConcurrencyAgent(), ad: &recorder{}}
	var handles []core.Store
	for i := range n {
		st, hints := open(t)
		handles = append(handles, st)
		if i == 0 {
			x.store = st
		}
		ds := &FaultStore{Store: st}
		eng, err := core.New(core.Options{Store: ds, Agent: x.agent, Bots: bots, ShutdownGrace: 5 * time.Second,
			Limits: core.Limits{MaxConcurrentRuns: 8}, Shared: true, SelfApprove: true, ProcessID: fmt.Sprintf("p%d", i+1),
			LeaseTTL: ttl, Hints: hints, SweepInterval: 200 * time.Millisecond, Cost: cost,
			Logger: slog.New(slog.NewTextHandler(testWriter{t, fmt.Sprintf("p%d", i+1)}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
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
		for _, h := range handles {
			_ = h.Close()
		}
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
	if err := x.tell(context.Background(), i, conv, text); err != nil {
		x.t.Fatal(err)
	}
}

// tell is say returning the error, for goroutines other than the test's.
func (x *sharedRig) tell(ctx context.Context, i int, conv, text string) error {
	n := x.seq.Add(1)
	in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", n),
		ThreadKey: "console:" + conv, Conversation: core.ConversationRef(conv), PlatformID: fmt.Sprintf("in%d", n),
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}
	if _, err := x.engines[i].Ingest(ctx, in); err != nil {
		return fmt.Errorf("ingest through engine %d: %w", i, err)
	}
	return nil
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

// testAnswerEachMessageOnce: three engines on one store take a stream of
// messages over many threads and two bots, each message ingested through a
// random engine. Every run completes; every human message's answer is
// delivered exactly once (a run taken over after a failed settle may run
// twice, as after a restart, and is still delivered once); no bot ever runs two
// runs in one thread; a bot's max_parallel_threads holds across the engines;
// and each conversation's replies arrive in the order they were stored.
func testAnswerEachMessageOnce(t *testing.T, open Opener) {
	bots := []core.BotProfile{
		{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: 3},
		{Handle: "engineer", Name: "Engineer", MaxParallelThreads: 2},
	}
	x := newSharedRig(t, open, 3, bots, 2*time.Second)
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
	delivered := x.deliveredByMessage()
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
			if delivered[m.ID] != 1 {
				t.Errorf("message %d %q: its answer was delivered %d times, want once", m.ID, m.Text, delivered[m.ID])
			}
			if answered[m.ID] > 1 {
				// A run whose settle failed (a store error) is taken over once its
				// claim lapses and runs again, as after a restart: allowed, and
				// still delivered once.
				t.Logf("message %d was answered by %d runs (a run was taken over)", m.ID, answered[m.ID])
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
			if !r.LeaseUntil.IsZero() {
				t.Errorf("settled run %d still holds a claim until %s", r.ID, r.LeaseUntil)
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

// hangFirstRun makes the first run hang in its engine until that engine's run
// context ends (later runs call later, if set, and answer), sends a message to
// conversation conv through engine 0, and returns the index of the engine
// running the hung run once it started.
func (x *sharedRig) hangFirstRun(conv string, later func()) int {
	x.t.Helper()
	started := make(chan string, 1)
	var first atomic.Bool
	x.agent.block = func(job *core.Job) bool {
		if first.CompareAndSwap(false, true) {
			started <- job.Run.Owner
			return true
		}
		if later != nil {
			later()
		}
		return false
	}
	x.say(0, conv, "hello")
	var owner string
	select {
	case owner = <-started:
	case <-time.After(10 * time.Second):
		x.t.Fatal("no run started")
	}
	i := slices.IndexFunc(x.engines, func(e *core.Engine) bool { return e.ClaimOwner() == owner })
	if i < 0 {
		x.t.Fatalf("run owner %q is no engine", owner)
	}
	return i
}

// answers counts the answers delivered, by every engine.
func (x *sharedRig) answers() (n int, texts []string) {
	for _, d := range x.ad.deliveries() {
		texts = append(texts, d.Text)
		if strings.Contains(d.Text, "answers") {
			n++
		}
	}
	return n, texts
}

// testKilledMidRunIsRecovered: the engine running a run "dies"
// (its store calls fail from then on, so it neither renews its claim nor
// settles). Once the claim lapses another engine recovers the run as a
// restart would, under the same run id, and answers the message once; the
// dead engine's late result is never stored.
func testKilledMidRunIsRecovered(t *testing.T, open Opener) {
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}}
	x := newSharedRig(t, open, 2, bots, 600*time.Millisecond)
	victim := x.hangFirstRun("k1", nil)
	survivor := 1 - victim
	x.stores[victim].Kill() // SIGKILL: nothing it does reaches the store any more
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
	answers, texts := x.answers()
	if answers != 1 {
		t.Errorf("delivered %q, want exactly one answer", texts)
	}
}

// testFirstAnswerWins: a bot's approval question is answered at the same
// moment through three engines with different decisions. Exactly one answer
// is accepted, the others are told it was already decided, and the run
// resumes once, in whichever process picks it, with the accepted decision.
func testFirstAnswerWins(t *testing.T, open Opener) {
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}}
	x := newSharedRig(t, open, 3, bots, 2*time.Second)
	x.agent.pause = func(job *core.Job) (core.Result, bool) {
		if job.Resume == nil {
			return core.Result{Pause: &core.Pause{Kind: core.QuestionApproval, Text: "@chief_of_staff wants to run shell",
				Tool: "shell", Args: []byte(`{"command":"make deploy"}`), CallID: "call_1"}, Checkpoint: []byte(`{}`)}, true
		}
		return core.Result{Reply: "resumed with " + job.Resume.Decision()}, true
	}
	x.say(0, "q1", "deploy please")
	var q core.Question
	deadline := time.Now().Add(20 * time.Second)
	for q.ID == 0 {
		x.view(func(tx core.ReadTx) error {
			qs, err := tx.Questions(true, 0)
			if len(qs) > 0 {
				q = qs[0]
			}
			return err
		})
		if q.ID == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no question was asked")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	outcomes := make([]core.AnswerOutcome, 3)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := x.engines[i].Answer(context.Background(), core.Answer{Question: q.ID, Choice: i % 2,
				Actor: "console:you", Name: "you", Account: "console/local"})
			if err != nil {
				t.Errorf("answer through engine %d: %v", i, err)
			}
			outcomes[i] = res.Outcome
		}()
	}
	close(start)
	wg.Wait()
	x.idle(1)
	accepted := 0
	for _, o := range outcomes {
		switch o {
		case core.AnswerAccepted:
			accepted++
		case core.AnswerDecided:
		default:
			t.Errorf("outcome %q, want accepted or already_decided", o)
		}
	}
	if accepted != 1 {
		t.Errorf("outcomes %v: %d accepted, want exactly one", outcomes, accepted)
	}
	x.agent.mu.Lock()
	resumed := append([]string(nil), x.agent.resumed...)
	x.agent.mu.Unlock()
	if len(resumed) != 1 {
		t.Errorf("the run resumed %d times (%v), want once", len(resumed), resumed)
	}
	x.view(func(tx core.ReadTx) error {
		cur, err := tx.Question(q.ID)
		if err != nil {
			return err
		}
		if cur.Status == core.QuestionPending || len(resumed) == 1 && cur.Decision() != resumed[0] {
			t.Errorf("question %s decided %q, the run resumed with %v", cur.Status, cur.Decision(), resumed)
		}
		return nil
	})
}

// testCutOffProcessStopsBeforeTakeover: the engine running a run is cut off
// from the store (every call hangs) but stays alive. It cannot renew its
// claim, so it stops the run itself before the claim lapses; only then does
// another engine take the run over, and when the first one reaches the store
// again it settles nothing: the message is answered once, by the other.
func testCutOffProcessStopsBeforeTakeover(t *testing.T, open Opener) {
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}}
	x := newSharedRig(t, open, 2, bots, 1500*time.Millisecond)
	var seq atomic.Int64
	var stoppedAt, takenAt atomic.Int64
	x.agent.onBlockEnd = func() { stoppedAt.CompareAndSwap(0, seq.Add(1)) }
	victim := x.hangFirstRun("c1", func() { takenAt.CompareAndSwap(0, seq.Add(1)) })
	release := x.stores[victim].Stall()
	x.idle(1 - victim)
	release()
	if stoppedAt.Load() == 0 || takenAt.Load() == 0 || stoppedAt.Load() > takenAt.Load() {
		t.Errorf("the cut-off engine stopped its run at step %d, the other took it over at step %d: want stopped first", stoppedAt.Load(), takenAt.Load())
	}
	x.stop(victim)
	answers, _ := x.answers()
	if answers != 1 {
		t.Errorf("%d answers delivered, want 1", answers)
	}
}

// testBudgetHoldsAcrossEngines: a bot's daily budget has one call left;
// eight of its threads start at once on two engines, each asking its Meter
// before its one model call. The call let through records nothing until every
// other run was refused, so each of them sees only its hold: one call is made
// (its hold counts toward the budget the others see), seven runs are refused
// with the budget's notice (at their start or at their Meter), and the ledger
// gets one entry.
func testBudgetHoldsAcrossEngines(t *testing.T, open Opener) {
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", MaxParallelThreads: 8}}
	cost := &core.Cost{Bots: map[string]core.BotBudget{"engineer": {Daily: core.Limit{Tokens: 100}}}}
	x := newSharedRigCost(t, open, 2, bots, 2*time.Second, cost)
	now := time.Now()
	if err := x.store.Update(context.Background(), func(tx core.Tx) error {
		_, _, err := tx.PutUsage(core.UsageEntry{Key: "earlier", At: now, Bot: "engineer", Model: "m", InputTokens: 80, OutputTokens: 10})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const threads = 8
	var (
		mu       sync.Mutex
		passed   int
		refused  []string
		othersIn = make(chan struct{})
	)
	x.ad.mu.Lock()
	x.ad.notice = func(text string) {
		if !strings.Contains(text, "budget of @engineer is spent") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refused = append(refused, text); len(refused) == threads-1 {
			close(othersIn)
		}
	}
	x.ad.mu.Unlock()
	x.agent.meter = func(ctx context.Context, job *core.Job) error {
		m := job.Env.(core.Meter)
		if err := m.BeforeModelCall(ctx, core.ModelCall{Call: 1, Model: "m", InputTokens: 15, OutputTokens: 5}); err != nil {
			return err
		}
		mu.Lock()
		passed++
		mu.Unlock()
		select {
		case <-othersIn:
		case <-ctx.Done():
			return ctx.Err()
		}
		return m.RecordModelCall(ctx, core.ModelCall{Call: 1, Model: "m", InputTokens: 15, OutputTokens: 5})
	}
	for i := range threads {
		x.say(i%2, fmt.Sprintf("b%d", i), "go")
	}
	select {
	case <-othersIn:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("%d runs let through, %d refused, of %d", passed, len(refused), threads)
	}
	x.idle(0)
	x.idle(1)
	mu.Lock()
	defer mu.Unlock()
	if passed != 1 {
		t.Errorf("%d runs were let through to a model call, want 1", passed)
	}
	var entries []core.UsageEntry
	x.view(func(tx core.ReadTx) error {
		var err error
		entries, err = tx.UsageEntries(0, 0)
		return err
	})
	if len(entries) != 2 {
		t.Errorf("ledger = %+v, want the earlier entry and one call", entries)
	}
	for _, r := range refused {
		if !strings.Contains(r, "(110 of 100 tokens, calls in flight included)") {
			t.Errorf("notice %q", r)
		}
	}
}
