package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// holdStore holds the commit of an armed Batch: the function runs, then the
// transaction waits inside the store (so no commit lands) until the test gives
// the outcome of each run of the function in turn (nil commits, an error rolls
// back; Batch runs a failed function again alone).
type holdStore struct {
	core.Store
	armed    atomic.Bool
	once     sync.Once
	held     chan struct{} // closed once the armed function has run the first time
	outcomes chan error    // one per run of the armed function
	// direct runs the armed function through Update instead of Batch, once.
	direct atomic.Bool
}

func newHoldStore(s core.Store) *holdStore {
	return &holdStore{Store: s, held: make(chan struct{}), outcomes: make(chan error, 4)}
}

func (s *holdStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.Batch(ctx, fn)
	}
	run := s.Store.Batch
	if s.direct.Load() {
		run = s.Store.Update // one run, no recovery: a panic reaches the caller as is
	}
	return run(ctx, func(tx core.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		s.once.Do(func() { close(s.held) })
		err := <-s.outcomes
		if errors.Is(err, errPanicOutcome) {
			panic("a bug in the ingest's transaction")
		}
		return err
	})
}

// errPanicOutcome, given as an outcome, makes that run of the armed function
// panic instead of returning.
var errPanicOutcome = errors.New("panic")

// earlyRig is a harness whose store holds one ingest's commit, and whose
// chief_of_staff reports each run it starts (what it read of its thread) on
// started and then does what act says.
type earlyRig struct {
	h       *harness
	hs      *holdStore
	started chan earlyStart
	holding atomic.Bool // sayHeld is waiting for a run to start
	act     func(ctx context.Context, job *core.Job) (string, error)
	obs     *runCounter // the engine's Observer
}

type earlyStart struct {
	count int
	texts []string
	held  chan bool // sayHeld tells the run whether it started while the commit was held
}

func newEarlyRig(t *testing.T, mutate ...func(*core.Options)) *earlyRig {
	r := &earlyRig{h: newHarness(t, core.Limits{}), started: make(chan earlyStart, 8), obs: &runCounter{}}
	r.h.opts = func(o *core.Options) {
		r.hs = newHoldStore(o.Store)
		o.Store = r.hs
		o.Observer = r.obs
		for _, m := range mutate {
			m(o)
		}
	}
	r.h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[0].Text == "warm up" {
			return "ok", nil
		}
		n, err := job.Env.Count(ctx)
		if err != nil {
			return "", err
		}
		ms, err := job.Env.MessagesBefore(ctx, 0, 50)
		if err != nil {
			return "", err
		}
		var texts []string
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		if !r.holding.Load() {
			return r.act(ctx, job)
		}
		s := earlyStart{count: n, texts: texts, held: make(chan bool, 1)}
		r.started <- s
		var held bool
		select {
		case held = <-s.held:
		case <-ctx.Done(): // abandoned while sayHeld looked elsewhere; it may still have answered
			select {
			case held = <-s.held:
			default:
				return "", ctx.Err()
			}
		}
		if !held {
			return "not the held one", nil
		}
		return r.act(ctx, job)
	}
	r.h.start()
	r.h.say("warm up")
	r.h.idle()
	return r
}

// sayHeld ingests text with its commit held and waits for the bot's run to start
// while it is held. The worker may be finishing its last pick, and then an ingest
// leaves the pick to it: a few tries, each released with a commit.
func (r *earlyRig) sayHeld(t *testing.T, text string) (earlyStart, chan error) {
	t.Helper()
	r.holding.Store(true)
	defer r.holding.Store(false)
	for try := range 3 {
		r.hs.armed.Store(true)
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Errorf("Ingest panicked: %v", p)
				}
			}()
			_, err := r.h.eng.Ingest(context.Background(), core.Inbound{Account: "console/local", Platform: "console",
				DedupKey: "early:" + text + string(rune('a'+try)), ThreadKey: "console:main", Conversation: "main",
				SenderID: "console:you", SenderName: "you", Text: text, StartThread: true})
			done <- err
		}()
		<-r.hs.held
		select {
		case s := <-r.started:
			select {
			case err := <-done:
				t.Fatalf("Ingest returned %v while its commit was held", err)
			default:
			}
			s.held <- true
			return s, done
		case <-time.After(5 * time.Second): // liveness only: the run starts at once when it does
		}
		r.hs.outcomes <- nil
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		(<-r.started).held <- false
		r.h.idle()
		r.hs.once, r.hs.held = sync.Once{}, make(chan struct{})
	}
	t.Fatal("no run started while its ingest's commit was held")
	return earlyStart{}, nil
}

// sayFailed is sayHeld whose commit then fails, on each run of the function;
// it checks that Ingest returns the commit's error.
func (r *earlyRig) sayFailed(t *testing.T, text string) {
	t.Helper()
	_, done := r.sayHeld(t, text)
	boom := errors.New("disk full")
	r.hs.outcomes <- boom
	r.hs.outcomes <- boom // Batch runs the failed function again, alone
	if err := <-done; !errors.Is(err, boom) {
		t.Fatalf("Ingest = %v, want the commit's error", err)
	}
}

// TestRunStartsBeforeIngestCommits: an ingest that wakes an idle bot starts the
// run while its commit is still being written, so the model request does not wait
// for the disk; the run reads its thread, new message included, from the ingest's
// own transaction, and nothing it writes lands before that commit.
func TestRunStartsBeforeIngestCommits(t *testing.T) {
	r := newEarlyRig(t)
	wrote := make(chan error, 1)
	r.act = func(ctx context.Context, job *core.Job) (string, error) {
		err := job.Env.SetTodo(ctx, []core.TodoItem{{Text: "answer", Status: "pending"}})
		wrote <- err
		return "answered", err
	}
	s, done := r.sayHeld(t, "question one")
	if s.count != len(s.texts) || !slices.Contains(s.texts, "question one") {
		t.Fatalf("run read %d messages %q before the commit, want them all, the new message included", s.count, s.texts)
	}
	select {
	case err := <-wrote:
		t.Fatalf("the run's write returned (%v) before its ingest committed", err)
	default:
	}
	r.hs.outcomes <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the run's write after the commit: %v", err)
	}
	r.h.idle()
	if got := r.h.ad.texts(); !slices.Contains(got, "[chief_of_staff] answered") {
		t.Fatalf("delivered %q, want the run's answer", got)
	}
}

// TestRunAbandonedWhenIngestFails: when the commit of the ingest that started a
// run fails, the run stops (its context ends, so the model request does too) and
// leaves no trace: nothing it wrote lands, no reply, no notice, no run record;
// and its slot is free for the next message.
func TestRunAbandonedWhenIngestFails(t *testing.T) {
	r := newEarlyRig(t)
	type outcome struct {
		write   error
		stopped bool
	}
	ended := make(chan outcome, 8)
	// One act for every run: the function's second run (alone) may start a run
	// too, which may read r.act late, so it is never replaced.
	r.act = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[len(job.Triggers)-1].Text == "after" {
			return "fine", nil
		}
		err := job.Env.SetTodo(ctx, []core.TodoItem{{Text: "should not land", Status: "pending"}})
		<-ctx.Done()
		ended <- outcome{write: err, stopped: ctx.Err() != nil}
		return "should not be posted", err
	}
	before := len(r.h.ad.texts())
	r.sayFailed(t, "doomed")
	got := <-ended
	if got.write == nil || !got.stopped {
		t.Fatalf("abandoned run: write error %v, context ended %v; want the write refused and the run stopped", got.write, got.stopped)
	}

	r.h.say("after")
	r.h.idle()
	texts := r.h.ad.texts()[before:]
	if !slices.Equal(texts, []string{"[chief_of_staff] fine"}) {
		t.Fatalf("delivered after the failed ingest %q, want only the next message's answer", texts)
	}
	for _, run := range r.h.runs(core.RunCompleted) {
		if slices.ContainsFunc(r.h.messages(run.Thread), func(m core.Message) bool { return m.Text == "doomed" }) {
			t.Fatalf("the failed ingest's message was stored")
		}
	}
	if err := r.h.store.View(context.Background(), func(tx core.ReadTx) error {
		todo, err := tx.Todo(core.BotProfile{Handle: "chief_of_staff"}.ID(), r.h.runs(core.RunCompleted)[0].Thread)
		if err != nil {
			return err
		}
		if len(todo) > 0 {
			t.Errorf("the abandoned run's write landed: %+v", todo)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestIngestRunAgainAbandonsFirstRun: when Batch runs an ingest's function again
// (its first run's transaction rolled back), the run the first run started is
// abandoned and the message is still answered exactly once.
func TestIngestRunAgainAbandonsFirstRun(t *testing.T) {
	r := newEarlyRig(t)
	var calls atomic.Int32
	r.act = func(ctx context.Context, job *core.Job) (string, error) {
		if calls.Add(1) == 1 {
			err := job.Env.SetTodo(ctx, []core.TodoItem{{Text: "first try", Status: "pending"}})
			if err == nil {
				return "", errors.New("the first run's write landed")
			}
			return "", err
		}
		return "answered once", nil
	}
	before := len(r.h.ad.texts())
	_, done := r.sayHeld(t, "retried")
	r.hs.outcomes <- errors.New("rolled back with its group")
	r.hs.outcomes <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.h.idle()
	texts := r.h.ad.texts()[before:]
	if !slices.Equal(texts, []string{"[chief_of_staff] answered once"}) {
		t.Fatalf("delivered %q, want the answer once and nothing of the abandoned run", texts)
	}
}

// untilStopped makes the bot answer "after" with "fine" and hold every other
// run until its context ends; the channel closes when the first such run has.
func (r *earlyRig) untilStopped() <-chan struct{} {
	ended := make(chan struct{})
	var once sync.Once
	r.act = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[len(job.Triggers)-1].Text == "after" {
			return "fine", nil
		}
		<-ctx.Done()
		once.Do(func() { close(ended) })
		return "", ctx.Err()
	}
	return ended
}

// runCounter counts the runs an engine reports started and ended.
type runCounter struct {
	core.NopObserver
	started, ended atomic.Int32
}

func (c *runCounter) RunStarted(string)                              { c.started.Add(1) }
func (c *runCounter) RunEnded(string, core.RunStatus, time.Duration) { c.ended.Add(1) }

// TestAbandonedRunNotCounted: a run abandoned because its ingest's commit failed
// ends without a trace in the metrics too: it is not counted as started (it
// never ends, so it would stay "in flight" in started minus ended forever).
func TestAbandonedRunNotCounted(t *testing.T) {
	r := newEarlyRig(t)
	ended := r.untilStopped() // the function's second run (alone) may start a run too: every one ends
	r.sayFailed(t, "doomed")
	<-ended
	r.h.say("after")
	r.h.idle()
	if s, e := r.obs.started.Load(), r.obs.ended.Load(); s != 2 || e != 2 {
		t.Fatalf("runs started %d, ended %d; want the warm-up and the answered run only (2, 2)", s, e)
	}
}

// lineWatch is a log sink that reports, once, the first line holding want.
type lineWatch struct {
	want string
	once sync.Once
	seen chan struct{}
}

func (l *lineWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// TestSlowIngestCommitStillAnswered: a run that finished before the commit of
// the ingest that started it, a commit slower than the shutdown grace, waits
// for that commit as long as it takes when openbot is not stopping: the
// message was acknowledged, and a run given up would stay running, unanswered,
// until the next start.
func TestSlowIngestCommitStillAnswered(t *testing.T) {
	logs := &lineWatch{want: "the commit of the message that started", seen: make(chan struct{})}
	// The harness's grace (2 s) also bounds the run's settle, so it stays.
	r := newEarlyRig(t, func(o *core.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	r.act = func(ctx context.Context, job *core.Job) (string, error) { return "answered", nil }
	before := len(r.h.ad.texts())
	_, done := r.sayHeld(t, "slow disk")
	<-logs.seen // the run's wait for the commit outlasted the grace
	r.hs.outcomes <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.h.idle()
	if got := r.h.ad.texts()[before:]; !slices.Equal(got, []string{"[chief_of_staff] answered"}) {
		t.Fatalf("delivered %q after the slow commit, want the run's answer", got)
	}
}

// TestIngestPanicAbandonsItsRun: when the ingest's transaction panics (a bug;
// Batch runs the function again alone, on the caller's goroutine, where the panic
// reaches the caller), the run it started is abandoned rather than left waiting
// for a commit that will never be decided, holding its thread and its slot.
func TestIngestPanicAbandonsItsRun(t *testing.T) {
	r := newEarlyRig(t)
	r.hs.direct.Store(true)   // the panic of the function's last run, as Batch's solo run raises it
	ended := r.untilStopped() // each run of the function may start a run: every one must end
	_, done := r.sayHeld(t, "doomed")
	r.hs.outcomes <- errPanicOutcome
	<-done
	select {
	case <-ended:
	case <-time.After(10 * time.Second): // liveness only: it ends at once when it does
		t.Fatal("the run started by the panicked ingest still runs: its thread and slot are held")
	}
	before := len(r.h.ad.texts())
	r.h.say("after")
	r.h.idle()
	if got := r.h.ad.texts()[before:]; !slices.Equal(got, []string{"[chief_of_staff] fine"}) {
		t.Fatalf("delivered %q after the panicked ingest, want the next message's answer", got)
	}
}
