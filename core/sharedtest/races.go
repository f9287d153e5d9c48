package sharedtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// Races between processes: two or more engines make the same change at the
// same moment, released together from a barrier, and the store keeps the
// engine's invariants (docs/ARCHITECTURE.md, "Write transactions that run at
// once"). Each case repeats its race many times so that it really happens.

// atOnce calls fn(i) for i in [0, n) on n goroutines released together, and
// returns when every call returned.
func atOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// idleAll waits until every engine sees nothing in flight.
func (x *sharedRig) idleAll() {
	x.t.Helper()
	for i := range x.engines {
		x.idle(i)
	}
}

// deliveredTwice reports every stored message delivered more than once to a
// conversation.
func (x *sharedRig) deliveredTwice() []string {
	seen := map[string]int{}
	var twice []string
	for _, d := range x.ad.deliveries() {
		k := fmt.Sprintf("message %d to %s", d.Message, d.Conversation)
		if seen[k]++; seen[k] == 2 {
			twice = append(twice, k)
		}
	}
	return twice
}

// allItems reads every inbox item, by status.
func allItems(tx core.ReadTx) ([]core.InboxItem, error) {
	var all []core.InboxItem
	for _, st := range []core.ItemStatus{core.ItemQueued, core.ItemProcessing, core.ItemDone, core.ItemCancelled, core.ItemFailed} {
		its, err := tx.ItemsByStatus(st)
		if err != nil {
			return nil, err
		}
		all = append(all, its...)
	}
	return all, nil
}

// testSameMessageAtOnce: three engines ingest one platform message (one
// dedup key, one thread key, mentioning a bot) at the same moment, as when a
// platform redelivers an event to every process; repeated with 20 messages.
// Each message is stored once, in one thread; every Ingest reports it, all
// but one as a duplicate; the bot it mentions gets one item and answers it
// once, and the bot it does not mention gets none.
func testSameMessageAtOnce(t *testing.T, open Opener) {
	bots := []core.BotProfile{
		{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: 4},
		{Handle: "engineer", Name: "Engineer", MaxParallelThreads: 4},
	}
	x := newSharedRig(t, open, 3, bots, 2*time.Second)
	const rounds = 20
	for k := range rounds {
		in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:same%d", k),
			ThreadKey: fmt.Sprintf("console:same%d", k), Conversation: core.ConversationRef(fmt.Sprintf("same%d", k)),
			PlatformID: fmt.Sprintf("same%d", k), SenderID: "console:you", SenderName: "you",
			Text: fmt.Sprintf("@engineer message %d", k), StartThread: true}
		res := make([]core.IngestResult, len(x.engines))
		errs := make([]error, len(x.engines))
		atOnce(len(x.engines), func(i int) { res[i], errs[i] = x.engines[i].Ingest(context.Background(), in) })
		first := 0
		for i, r := range res {
			if errs[i] != nil {
				t.Fatalf("message %d: Ingest through engine %d: %v", k, i, errs[i])
			}
			if !r.Duplicate {
				first++
			}
			if r.Message != res[0].Message || r.Thread != res[0].Thread || r.Message == 0 {
				t.Errorf("message %d: the engines report %+v, want one message in one thread", k, res)
				break
			}
		}
		if first != 1 {
			t.Errorf("message %d: %d Ingest calls stored it (%+v), want 1 and the others duplicates", k, first, res)
		}
	}
	x.idleAll()

	delivered := x.deliveredByMessage()
	x.view(func(tx core.ReadTx) error {
		ms, err := tx.MessagesSince(0, 0)
		if err != nil {
			return err
		}
		stored := map[string]int{}
		for _, m := range ms {
			if m.Sender != "console:you" {
				continue
			}
			stored[m.Text]++
			if delivered[m.ID] != 1 {
				t.Errorf("message %d %q: its answer was delivered %d times, want once", m.ID, m.Text, delivered[m.ID])
			}
		}
		for k := range rounds {
			if n := stored[fmt.Sprintf("@engineer message %d", k)]; n != 1 {
				t.Errorf("message %d stored %d times, want once", k, n)
			}
		}
		threads, err := tx.Threads(0)
		if err != nil {
			return err
		}
		if len(threads) != rounds {
			t.Errorf("%d threads, want %d (one per thread key)", len(threads), rounds)
		}
		items, err := allItems(tx)
		if err != nil {
			return err
		}
		perMessage := map[core.MessageID]int{}
		for _, it := range items {
			if it.Actor != core.BotActorID("engineer") {
				t.Errorf("item %d for %s, which no message addressed", it.ID, it.Actor)
				continue
			}
			perMessage[it.Message]++
			if it.Status != core.ItemDone {
				t.Errorf("item %d is %s, want done", it.ID, it.Status)
			}
		}
		for _, m := range ms {
			if m.Sender == "console:you" && perMessage[m.ID] != 1 {
				t.Errorf("message %d: %d items for @engineer, want 1", m.ID, perMessage[m.ID])
			}
		}
		return nil
	})
	if twice := x.deliveredTwice(); len(twice) > 0 {
		t.Errorf("delivered twice: %v", twice)
	}
}

// testPickSameQueueAtOnce: a paused bot's mailbox fills with two messages in
// each of 40 threads; then every engine resumes it at the same moment, so all
// of them pick from one queue at once and keep picking as runs end; each run
// waits until the bot's limit of runs is in flight. Every item
// is taken by exactly one run and done; the bot never runs two runs in one
// thread nor more threads at once than its max_parallel_threads, across the
// engines; every message is answered once.
func testPickSameQueueAtOnce(t *testing.T, open Opener) {
	const parallel, threads, perThread = 3, 40, 2
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: parallel}}
	x := newSharedRig(t, open, 3, bots, 2*time.Second)
	// Each run waits until the bot runs max_parallel_threads at once (or every
	// thread's run started), so runs overlap as long as the engines let them,
	// whatever the store's speed: a run too many is in flight with the others.
	var (
		gmu      sync.Mutex
		inFlight int
		started  int
		full     = make(chan struct{})
	)
	x.agent.meter = func(ctx context.Context, job *core.Job) error {
		gmu.Lock()
		inFlight++
		started++
		ch := full
		if inFlight >= parallel || started == threads {
			close(full)
			full = make(chan struct{})
		}
		gmu.Unlock()
		defer func() { gmu.Lock(); inFlight--; gmu.Unlock() }()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	by := core.By{Actor: "console:you", Name: "you", Via: "console/local"}
	if err := x.engines[0].PauseBot(context.Background(), "chief_of_staff", by); err != nil {
		t.Fatal(err)
	}
	for c := range threads {
		for k := range perThread {
			x.say(c%len(x.engines), fmt.Sprintf("q%d", c), fmt.Sprintf("message %d of q%d", k, c))
		}
	}
	x.view(func(tx core.ReadTx) error {
		n, err := tx.CountQueued()
		if err == nil && n != threads*perThread {
			t.Fatalf("%d items queued for the paused bot, want %d", n, threads*perThread)
		}
		return err
	})
	atOnce(len(x.engines), func(i int) {
		if err := x.engines[i].ResumeBot(context.Background(), "chief_of_staff", by); err != nil {
			t.Errorf("ResumeBot through engine %d: %v", i, err)
		}
	})
	x.idleAll()

	x.agent.mu.Lock()
	overlaps, maxBot := x.agent.overlaps, x.agent.maxBot["chief_of_staff"]
	x.agent.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("a bot ran two runs at once in one thread: %v", overlaps)
	}
	if maxBot > parallel {
		t.Errorf("%d runs of the bot at once across the engines, want at most max_parallel_threads = %d", maxBot, parallel)
	}
	delivered := x.deliveredByMessage()
	owners := map[string]int{}
	x.view(func(tx core.ReadTx) error {
		runs, err := tx.RunsBefore(0, 0)
		if err != nil {
			return err
		}
		takenBy := map[core.ItemID][]core.RunID{}
		for _, r := range runs {
			owners[r.Owner]++
			if r.Status != core.RunCompleted {
				t.Errorf("run %d is %s, want completed", r.ID, r.Status)
			}
			for _, id := range r.Items {
				takenBy[id] = append(takenBy[id], r.ID)
			}
		}
		items, err := allItems(tx)
		if err != nil {
			return err
		}
		if len(items) != threads*perThread {
			t.Errorf("%d items, want %d", len(items), threads*perThread)
		}
		for _, it := range items {
			if len(takenBy[it.ID]) != 1 || it.Status != core.ItemDone {
				t.Errorf("item %d (%s) taken by runs %v, want one run", it.ID, it.Status, takenBy[it.ID])
			}
			if delivered[it.Message] != 1 {
				t.Errorf("message %d: its answer was delivered %d times, want once", it.Message, delivered[it.Message])
			}
		}
		return nil
	})
	t.Logf("runs by owner: %v", owners)
	if twice := x.deliveredTwice(); len(twice) > 0 {
		t.Errorf("delivered twice: %v", twice)
	}
}

// testSettleRacesCancel: 16 runs each finish their answer at the moment
// another engine than the one running it cancels it (CancelRun). Each run
// ends in exactly one terminal state, the one CancelRun reports: cancelled
// when it returned nil (its items cancelled, the thread told who stopped it,
// no answer posted), completed when it returned ErrRunFinished (its items
// done, its answer delivered, no notice of a stop). Nothing is delivered twice.
func testSettleRacesCancel(t *testing.T, open Opener) {
	const runs = 16
	bots := []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief", MaxParallelThreads: runs}}
	x := newSharedRig(t, open, 3, bots, 2*time.Second)
	var (
		mu      sync.Mutex
		release = map[core.RunID]chan struct{}{}
		started = make(chan core.Run, runs)
	)
	x.agent.meter = func(ctx context.Context, job *core.Job) error {
		ch := make(chan struct{})
		mu.Lock()
		release[job.Run.ID] = ch
		mu.Unlock()
		select {
		case started <- job.Run:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for c := range runs {
		x.say(c%len(x.engines), fmt.Sprintf("s%d", c), fmt.Sprintf("message of s%d", c))
	}
	var inFlight []core.Run
	for range runs {
		select {
		case r := <-started:
			inFlight = append(inFlight, r)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d runs started", len(inFlight), runs)
		}
	}
	by := core.By{Actor: "console:you", Name: "you", Via: "console/local"}
	cancelErr := make([]error, runs)
	atOnce(2*runs, func(i int) {
		r := inFlight[i/2]
		if i%2 == 0 {
			mu.Lock()
			ch := release[r.ID]
			mu.Unlock()
			close(ch) // the run finishes its answer and settles
			return
		}
		other := (x.ownerIndex(r.Owner) + 1) % len(x.engines) // another process cancels it
		_, cancelErr[i/2] = x.engines[other].CancelRun(context.Background(), r.ID, by)
	})
	x.idleAll()

	delivered := x.deliveredByMessage()
	stops := map[core.ThreadID]int{}
	for _, d := range x.ad.deliveries() {
		if strings.Contains(d.Text, "work here was stopped by you") {
			stops[d.Thread]++
		}
	}
	won := map[core.RunStatus]int{}
	x.view(func(tx core.ReadTx) error {
		for i, r0 := range inFlight {
			r, err := tx.Run(r0.ID)
			if err != nil {
				return err
			}
			won[r.Status]++
			var want core.RunStatus
			var wantItem core.ItemStatus
			var answers, notices int
			switch {
			case cancelErr[i] == nil:
				want, wantItem, answers, notices = core.RunCancelled, core.ItemCancelled, 0, 1
			case errors.Is(cancelErr[i], core.ErrRunFinished):
				want, wantItem, answers, notices = core.RunCompleted, core.ItemDone, 1, 0
			default:
				t.Errorf("run %d: CancelRun: %v", r.ID, cancelErr[i])
				continue
			}
			if r.Status != want {
				t.Errorf("run %d is %s, and CancelRun returned %v: want %s", r.ID, r.Status, cancelErr[i], want)
			}
			for _, id := range r.Items {
				it, err := tx.Item(id)
				if err != nil {
					return err
				}
				if it.Status != wantItem {
					t.Errorf("run %d (%s): item %d is %s, want %s", r.ID, r.Status, id, it.Status, wantItem)
				}
			}
			for _, m := range r.Triggers {
				if delivered[m] != answers {
					t.Errorf("run %d (%s): message %d answered %d times, want %d", r.ID, r.Status, m, delivered[m], answers)
				}
			}
			if stops[r.Thread] != notices {
				t.Errorf("run %d (%s): %d notices of its stop delivered, want %d", r.ID, r.Status, stops[r.Thread], notices)
			}
			ms, err := tx.Messages(r.Thread, 0, 0)
			if err != nil {
				return err
			}
			posted := 0
			for _, m := range ms {
				if m.Run == r.ID && m.Sender == r.Bot {
					posted++
				}
			}
			if posted != answers {
				t.Errorf("run %d (%s): %d answers stored, want %d", r.ID, r.Status, posted, answers)
			}
		}
		return nil
	})
	t.Logf("runs by final state: %v", won)
	if twice := x.deliveredTwice(); len(twice) > 0 {
		t.Errorf("delivered twice: %v", twice)
	}
}
