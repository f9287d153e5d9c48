package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// TestIngestStartsIdleBotsRun: a message that wakes an idle bot starts its run in
// the ingest's own commit (one commit before the model request, not the ingest's
// and then the worker's pick), and a message to a thread where the bot is busy
// starts nothing there: it waits, queued, for the run in flight.
func TestIngestStartsIdleBotsRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	release := h.heldBot("chief_of_staff", "warm up")
	h.start()
	h.say("warm up") // the engine runs its workers
	h.idle()

	// The worker may be finishing the warm-up (its own pick after a run ends), and
	// then an ingest leaves the pick to it: a few tries, each to an idle bot.
	var (
		res     core.IngestResult
		running []core.Run
	)
	for try := range 3 {
		if try > 0 {
			release <- struct{}{}
			h.idle()
		}
		res = h.say("first")
		if running = h.runs(core.RunRunning); len(running) == 1 {
			break
		}
	}
	if len(running) != 1 || len(running[0].Triggers) != 1 || running[0].Triggers[0] != res.Message {
		t.Fatalf("running after the ingest returned = %+v, want one run of message %d", running, res.Message)
	}

	second := h.say("second")
	running = h.runs(core.RunRunning)
	if len(running) != 1 || running[0].Triggers[0] != res.Message {
		t.Fatalf("running after a message to the busy thread = %+v, want only the first run", running)
	}
	close(release)
	h.idle()
	done := h.runs(core.RunCompleted)
	if last := done[len(done)-1]; len(last.Triggers) != 1 || last.Triggers[0] != second.Message {
		t.Fatalf("completed runs = %+v, want the second message's run last, on its own", done)
	}
}

// heldBot makes handle answer warm at once and hold every other run until a
// value is sent on (or close of) the returned channel, or its context ends.
func (h *harness) heldBot(handle, warm string) chan struct{} {
	release := make(chan struct{})
	h.agent.reply[handle] = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[0].Text == warm {
			return "ok", nil
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done", nil
	}
	return release
}

// pickGateStore holds, once armed, the first read of bot's mailbox made outside
// a write transaction (the worker's look before it picks) after that read's
// transaction has ended, until release is closed; entered is closed when it does.
type pickGateStore struct {
	core.Store
	bot      core.ActorID
	armed    atomic.Bool
	entered  chan struct{}
	released chan struct{}
}

func (s *pickGateStore) View(ctx context.Context, fn func(core.ReadTx) error) error {
	var read bool
	err := s.Store.View(ctx, func(tx core.ReadTx) error { return fn(mailboxSpy{ReadTx: tx, bot: s.bot, read: &read}) })
	if read && s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.released
	}
	return err
}

// mailboxSpy notes a NextQueued of bot.
type mailboxSpy struct {
	core.ReadTx
	bot  core.ActorID
	read *bool
}

func (t mailboxSpy) NextQueued(actor core.ActorID, skip func(core.InboxItem) bool) (core.InboxItem, error) {
	if actor == t.bot {
		*t.read = true
	}
	return t.ReadTx.NextQueued(actor, skip)
}

// TestIngestPicksWhileWorkerLooks: a message arriving while the bot's worker is
// looking at its mailbox (after a wake-up) still starts its run in the ingest's
// own transaction; the look does not keep the ingest from picking, which would
// leave the run to a pick of the worker, one more commit before its model request.
func TestIngestPicksWhileWorkerLooks(t *testing.T) {
	h := newHarness(t, core.Limits{})
	held := h.heldBot("chief_of_staff", "warm up")
	gate := &pickGateStore{bot: core.BotActorID("chief_of_staff"), entered: make(chan struct{}), released: make(chan struct{})}
	h.opts = func(o *core.Options) {
		o.Bots = append([]core.BotProfile(nil), team...)
		o.Bots[0].MaxParallelThreads = 3
		gate.Store = o.Store
		o.Store = gate
	}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.released) }) }
	t.Cleanup(release) // a failure below must not leave the worker held at shutdown
	h.start()
	h.say("warm up")
	h.idle()

	// Each message in a thread of its own: the warm-up's thread may still be
	// marked busy for a moment after its run settled.
	gate.armed.Store(true)
	h.say("first", func(in *core.Inbound) { in.ThreadKey, in.Conversation = "console:first", "first" })
	// It started its run, then woke the worker, which looks and is held.
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never read its mailbox after the first message")
	}
	second := h.say("second", func(in *core.Inbound) { in.ThreadKey, in.Conversation = "console:other", "other" })
	running := h.runs(core.RunRunning)
	release()
	started := false
	for _, r := range running {
		started = started || slices.Contains(r.Triggers, second.Message)
	}
	if len(running) != 2 || !started {
		t.Errorf("running when the second ingest returned = %+v, want its run started beside the first", running)
	}
	close(held)
	h.idle()
	if done := h.runs(core.RunCompleted); len(done) != 3 {
		t.Errorf("completed runs = %d, want 3", len(done))
	}
}

// TestFailedIngestPickWakesWorker (shared store, where an ingest's pick starts
// its run only after the commit): when the ingest's transaction picked an older
// item and then failed, the worker is woken for that item. Its own look at the
// mailbox may have run while the pick held the item's thread busy, and passed it
// over; without a wake-up the item would wait for the next message or sweep.
func TestFailedIngestPickWakesWorker(t *testing.T) {
	h := newHarness(t, core.Limits{})
	held := h.heldBot("chief_of_staff", "warm up")
	gate := &pickGateStore{bot: core.BotActorID("chief_of_staff"), entered: make(chan struct{}), released: make(chan struct{})}
	var hold *holdStore
	h.opts = func(o *core.Options) {
		o.Shared, o.ProcessID, o.SweepInterval = true, "web-1", time.Hour // no sweep finds it
		hold = newHoldStore(o.Store)
		gate.Store = hold
		o.Store = gate
	}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.released) }) }
	t.Cleanup(release)
	h.start()
	in := func(thread string) func(*core.Inbound) {
		return func(in *core.Inbound) {
			in.ThreadKey, in.Conversation = "console:"+thread, core.ConversationRef(thread)
		}
	}
	h.say("A", in("a")) // runs, held: the bot's one thread is taken
	waitRunning(t, h, 1)
	b := h.say("B", in("b")) // queued behind it

	gate.armed.Store(true)
	held <- struct{}{} // A ends; the worker wakes, sees B queued, and is held before it picks
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never looked at its mailbox after A ended")
	}
	hold.armed.Store(true)
	failed := make(chan error, 1)
	go func() {
		_, err := h.eng.Ingest(context.Background(), core.Inbound{Account: "console/local", Platform: "console",
			DedupKey: "console:c", ThreadKey: "console:c", Conversation: "c", SenderID: "console:you",
			SenderName: "you", Text: "C", StartThread: true})
		failed <- err
	}()
	<-hold.held // C's transaction picked B (the oldest free item) and waits to commit
	release()   // the worker takes its pick lock, finds B's thread busy, and sleeps
	// Nothing outside shows the worker asleep; give it the moment it needs (it
	// takes microseconds). Too short a wait can only let the test pass wrongly:
	// the worker would then see B free and pick it without a wake-up.
	time.Sleep(100 * time.Millisecond)
	boom := errors.New("disk full")
	hold.outcomes <- boom
	hold.outcomes <- boom // Batch runs the failed function again, alone
	if err := <-failed; !errors.Is(err, boom) {
		t.Fatalf("Ingest of C = %v, want the commit's error", err)
	}
	// B is started by the worker, woken when the failed pick was given back.
	deadline := time.After(10 * time.Second)
	for {
		for _, r := range h.runs(core.RunRunning) {
			if slices.Contains(r.Triggers, b.Message) {
				close(held)
				return
			}
		}
		select {
		case <-deadline:
			t.Fatal("B stayed queued after the ingest that picked it failed")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitRunning waits until n runs are running (10 s at most).
func waitRunning(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(h.runs(core.RunRunning)) < n {
		select {
		case <-deadline:
			t.Fatalf("fewer than %d runs running after 10s", n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
