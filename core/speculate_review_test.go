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
	"openbot/store/bolt"
)

// reservingStore is the bolt store with its outstanding ID reservations counted.
type reservingStore struct {
	*bolt.Store
	mu  sync.Mutex
	out map[core.IDKind]map[uint64]bool
	// beforeBatch, when set, is called at the start of each Batch.
	beforeBatch func()
}

func (c *reservingStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	c.mu.Lock()
	f := c.beforeBatch
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return c.Store.Batch(ctx, fn)
}

func (c *reservingStore) ReserveID(k core.IDKind) (uint64, error) {
	id, err := c.Store.ReserveID(k)
	if err == nil {
		c.mu.Lock()
		if c.out == nil {
			c.out = map[core.IDKind]map[uint64]bool{}
		}
		if c.out[k] == nil {
			c.out[k] = map[uint64]bool{}
		}
		c.out[k][id] = true
		c.mu.Unlock()
	}
	return id, err
}

func (c *reservingStore) ReleaseIDs(k core.IDKind, ids ...uint64) int {
	c.mu.Lock()
	for _, id := range ids {
		delete(c.out[k], id)
	}
	c.mu.Unlock()
	return c.Store.ReleaseIDs(k, ids...)
}

func (c *reservingStore) outstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.out {
		n += len(m)
	}
	return n
}

// reviewRig is a specRig on a counting store with one global run slot.
func newReviewRig(t *testing.T, opts ...func(*core.Options)) (*specRig, *reservingStore) {
	cs := &reservingStore{}
	r := newSpecRig(t, append([]func(*core.Options){func(o *core.Options) {
		cs.Store = o.Store.(*bolt.Store)
		o.Store = cs
		o.Limits.MaxConcurrentRuns = 1
	}}, opts...)...)
	return r, cs
}

// afterwards checks that the engine still answers a message in another
// thread (no run slot or thread mark was left behind) and that every
// reservation was released.
func (r *specRig) afterwards(t *testing.T, cs *reservingStore) {
	t.Helper()
	r.h.idle()
	r.h.say("later", func(in *core.Inbound) { in.ThreadKey = "console:later" })
	select {
	case got := <-r.calls:
		if got != "later" {
			t.Fatalf("run for %q, want later", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a later message got no run: a run slot or thread mark leaked")
	}
	r.h.idle()
	if n := cs.outstanding(); n != 0 {
		t.Fatalf("%d ID reservations never released", n)
	}
}

// A neighbour in the ingest's group fails after the ingest adopted its
// speculative run: the group runs again, and the run is adopted (or abandoned
// and started again) exactly once.
func TestSpeculationSurvivesAGroupRerun(t *testing.T) {
	r, cs := newReviewRig(t)
	release := holdWriter(t, r.h.store, nil)
	ingested := r.ingest()
	r.waitCall(t, "speculative run")
	time.Sleep(50 * time.Millisecond) // the ingest's Batch is queued first
	var sawIngest bool
	neighbour := make(chan error, 1)
	go func() {
		failed := false
		neighbour <- r.h.store.Batch(context.Background(), func(tx core.Tx) error {
			if _, err := tx.Seen("console:spec"); err == nil && !failed {
				failed, sawIngest = true, true
				return errors.New("neighbour fails once")
			}
			return nil
		})
	}()
	time.Sleep(50 * time.Millisecond)
	release()
	if err := <-ingested; err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if err := <-neighbour; err != nil {
		t.Fatalf("neighbour: %v", err)
	}
	if !sawIngest {
		t.Skip("the neighbour did not share the ingest's group")
	}
	r.h.idle()
	runs := r.helloRuns(t)
	if len(runs) != 1 || runs[0].Status != core.RunCompleted {
		t.Fatalf("runs for hello: %+v, want one completed", runs)
	}
	started, adopted, missed := r.h.eng.Speculations()
	if started != adopted+missed {
		t.Fatalf("speculations: %d started, %d adopted, %d missed", started, adopted, missed)
	}
	n := 0
	for _, d := range r.h.ad.texts() {
		if d == "[chief_of_staff] reply 2" || d == "[chief_of_staff] reply 3" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("delivered %q: want hello answered once", r.h.ad.texts())
	}
	r.afterwards(t, cs)
}

// The ingest's context ends while its Batch waits: the speculative run is
// abandoned, its reservations released, and the message can come again.
func TestSpeculationAbandonedWhenIngestCancelled(t *testing.T) {
	r, cs := newReviewRig(t)
	release := holdWriter(t, r.h.store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := r.ingestCtx(ctx)
	r.waitCall(t, "speculative run")
	cancel()
	release()
	if err := <-done; err == nil {
		// The Batch may have started before the cancel: then it committed.
		t.Log("ingest committed before its context ended")
	}
	r.h.idle()
	if _, err := r.h.eng.Ingest(context.Background(), helloInbound()); err != nil {
		t.Fatal(err)
	}
	r.h.idle()
	for len(r.calls) > 0 {
		<-r.calls
	}
	if runs := r.helloRuns(t); len(runs) != 1 {
		t.Fatalf("runs for hello: %+v, want one", runs)
	}
	r.afterwards(t, cs)
}

// Shutdown while the speculative run waits for its ingest's commit: the
// engine stops, and the message is answered once after the next start.
func TestSpeculationAtShutdown(t *testing.T) {
	r, _ := newReviewRig(t)
	release := holdWriter(t, r.h.store, nil)
	ingested := r.ingest()
	r.waitCall(t, "speculative run")
	r.h.cancel()
	time.Sleep(100 * time.Millisecond)
	release()
	if err := <-ingested; err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	select {
	case err := <-r.h.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("engine did not stop")
	}
	r.h.cancel = nil
	if err := r.h.store.Close(); err != nil {
		t.Fatal(err)
	}
	r.h.start()
	r.h.idle()
	runs := r.helloRuns(t)
	if len(runs) != 1 || runs[0].Status != core.RunCompleted {
		t.Fatalf("runs for hello: %+v, want one completed", runs)
	}
	t.Log(r.h.ad.texts())
}

// The same event delivered twice at once, the second delivery's transaction
// ahead of the first's: the second waits for the first's ingest, so the
// speculative run is adopted and no second run starts.
func TestSpeculationDuplicateDeliveryQueuedFirst(t *testing.T) {
	r, cs := newReviewRig(t, func(o *core.Options) { // room for a second run
		o.Bots = slices.Clone(o.Bots)
		o.Bots[0].MaxParallelThreads = 4
		o.Limits.MaxConcurrentRuns = 4
	})
	s0, a0, m0 := r.h.eng.Speculations()
	release := holdWriter(t, r.h.store, nil)
	secondBatch := make(chan struct{})
	var calls int
	cs.mu.Lock()
	cs.beforeBatch = func() {
		cs.mu.Lock()
		calls++
		n := calls
		cs.mu.Unlock()
		switch n {
		case 1: // the first delivery's: after the second's, if it comes
			select {
			case <-secondBatch:
				time.Sleep(50 * time.Millisecond) // the second's Batch is queued
			case <-time.After(300 * time.Millisecond):
			}
		case 2:
			close(secondBatch)
		}
	}
	cs.mu.Unlock()
	first := r.ingest()
	r.waitCall(t, "first delivery")
	second := r.ingest() // the same dedup key
	// Both Batches are queued before the writer is free.
	time.Sleep(200 * time.Millisecond)
	release()
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("Ingest: %v", err)
		}
	}
	r.h.idle()
	cs.mu.Lock()
	cs.beforeBatch = nil
	cs.mu.Unlock()
	started, adopted, missed := r.h.eng.Speculations()
	if started-s0 != 1 || adopted-a0 != 1 || missed-m0 != 0 {
		t.Fatalf("speculations: %d started, %d adopted, %d abandoned; want one, adopted", started-s0, adopted-a0, missed-m0)
	}
	if runs := r.helloRuns(t); len(runs) != 1 {
		t.Fatalf("runs for hello: %+v, want one", runs)
	}
	for len(r.calls) > 0 {
		if got := <-r.calls; got == "hello" {
			t.Fatal("a second run for hello called the model")
		}
	}
	r.afterwards(t, cs)
}

// An ingest whose Batch fails (its context ended while it waited for the
// writer) abandons its speculative run: it counts as abandoned, so every
// speculation counts as adopted or abandoned (the bench prints both).
func TestSpeculationCountedWhenTheIngestFails(t *testing.T) {
	r, cs := newReviewRig(t)
	release := holdWriter(t, r.h.store, nil)
	blocker := make(chan error, 1)
	go func() { // the group in flight: the ingest's Batch waits for the next one
		blocker <- r.h.store.Batch(context.Background(), func(core.Tx) error { return nil })
	}()
	time.Sleep(50 * time.Millisecond) // the committer takes the blocker first
	ctx, cancel := context.WithCancel(context.Background())
	done := r.ingestCtx(ctx)
	r.waitCall(t, "speculative run")
	cancel()
	release()
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Ingest: %v, want context.Canceled (its Batch never ran)", err)
	}
	r.h.idle()
	if runs := r.helloRuns(t); len(runs) != 0 {
		t.Fatalf("runs for hello: %+v, want none", runs)
	}
	if started, adopted, missed := r.h.eng.Speculations(); started != adopted+missed {
		t.Fatalf("speculations: %d started, %d adopted, %d abandoned: one is neither", started, adopted, missed)
	}
	r.afterwards(t, cs)
}

// A reload between the speculation and the ingest's transaction changes the
// bot: the speculative run, picked with the old profile, is abandoned, and
// the reply comes from a run with the new one.
func TestSpeculationMissesAReloadedBot(t *testing.T) {
	r, cs := newReviewRig(t)
	var once sync.Once
	cs.mu.Lock()
	cs.beforeBatch = func() {
		once.Do(func() {
			bots := slices.Clone(team)
			bots[0].Instructions = "reloaded"
			if err := r.h.eng.Reload(context.Background(), core.Settings{Bots: bots, Limits: core.Limits{MaxConcurrentRuns: 1}}); err != nil {
				t.Error(err)
			}
		})
	}
	cs.mu.Unlock()
	if err := <-r.ingest(); err != nil {
		t.Fatal(err)
	}
	r.h.idle()
	var last *core.Job
	for _, j := range r.h.agent.jobsFor("chief_of_staff") {
		if j.Triggers[len(j.Triggers)-1].Text == "hello" {
			last = j
		}
	}
	if last == nil || last.Bot.Instructions != "reloaded" {
		t.Fatalf("the run for hello had instructions %q, want the reloaded ones", last.Bot.Instructions)
	}
	if started, adopted, _ := r.h.eng.Speculations(); started != 1 || adopted != 0 {
		t.Fatalf("speculative runs: %d started, %d adopted; want the old profile's started and abandoned", started, adopted)
	}
	if got := r.h.ad.texts(); len(got) != 2 {
		t.Fatalf("delivered %q, want the warm-up's reply and hello's", got)
	}
	for len(r.calls) > 0 {
		<-r.calls
	}
	r.afterwards(t, cs)
}

// Another message with the same new thread key is ingested between the
// speculation and the ingest's transaction: the two messages end up in one
// thread, each answered once, and no run is left behind.
func TestSpeculationNewThreadKeyTakenMeanwhile(t *testing.T) {
	r, cs := newReviewRig(t, func(o *core.Options) {
		o.Bots = slices.Clone(o.Bots)
		o.Bots[0].MaxParallelThreads = 4
		o.Limits.MaxConcurrentRuns = 4
	})
	var first atomic.Bool
	cs.mu.Lock()
	cs.beforeBatch = func() {
		if first.Swap(true) {
			return // the other message's own Batch
		}
		func() {
			in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:other",
				ThreadKey: "console:spec", Conversation: "main", PlatformID: "spec2",
				SenderID: "console:you", SenderName: "you", Text: "hello", StartThread: true}
			if _, err := r.h.eng.Ingest(context.Background(), in); err != nil {
				t.Error(err)
			}
		}()
	}
	cs.mu.Unlock()
	if err := <-r.ingest(); err != nil {
		t.Fatal(err)
	}
	r.h.idle()
	th, err := r.h.eng.ThreadByKey(context.Background(), "console:spec")
	if err != nil {
		t.Fatal(err)
	}
	var humans int
	for _, m := range r.h.messages(th) {
		if m.Text == "hello" {
			humans++
		}
	}
	if humans != 2 {
		t.Fatalf("thread %d holds %d hello messages, want both", th, humans)
	}
	for _, run := range r.helloRuns(t) {
		if run.Status != core.RunCompleted || run.Thread != th {
			t.Fatalf("run %+v: want completed in thread %d", run, th)
		}
	}
	if got := r.h.ad.texts(); len(got) < 2 || len(got) > 3 {
		t.Fatalf("delivered %q: want hello answered (once or twice)", got)
	}
	if started, adopted, missed := r.h.eng.Speculations(); started != adopted+missed {
		t.Fatalf("speculations: %d started, %d adopted, %d abandoned", started, adopted, missed)
	}
	for len(r.calls) > 0 {
		<-r.calls
	}
	r.afterwards(t, cs)
}
