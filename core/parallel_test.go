package core_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// gate is a blocking agent body: every run announces itself on started and waits
// until the test releases its thread (or its context ends). It records how many
// runs are active in total and per (bot, thread), and every breach of the caps.
type gate struct {
	maxTotal int // the global cap the test expects; 0 = not checked

	mu        sync.Mutex
	perThread map[string]int
	total     int
	peak      int
	breaches  []string
	rel       map[core.ThreadID]chan struct{}
	started   chan *core.Job
}

func newGate(maxTotal int) *gate {
	return &gate{maxTotal: maxTotal, perThread: map[string]int{}, rel: map[core.ThreadID]chan struct{}{},
		started: make(chan *core.Job, 64)}
}

func (g *gate) relChan(t core.ThreadID) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.rel[t]
	if c == nil {
		c = make(chan struct{}, 16)
		g.rel[t] = c
	}
	return c
}

// body is a scriptAgent reply function.
func (g *gate) body(reply func(*core.Job) string) func(context.Context, *core.Job) (string, error) {
	return func(ctx context.Context, job *core.Job) (string, error) {
		key := fmt.Sprint(job.Bot.Handle, "/", job.Thread.ID)
		g.mu.Lock()
		g.perThread[key]++
		g.total++
		g.peak = max(g.peak, g.total)
		if g.perThread[key] > 1 {
			g.breaches = append(g.breaches, "two runs at once in "+key)
		}
		if g.maxTotal > 0 && g.total > g.maxTotal {
			g.breaches = append(g.breaches, fmt.Sprintf("%d runs at once, cap %d", g.total, g.maxTotal))
		}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.perThread[key]--
			g.total--
			g.mu.Unlock()
		}()
		g.started <- job
		select {
		case <-g.relChan(job.Thread.ID):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if reply != nil {
			return reply(job), nil
		}
		return "done " + key, nil
	}
}

func (g *gate) release(t core.ThreadID) { g.relChan(t) <- struct{}{} }

// next waits for the next run to start.
func (g *gate) next(t *testing.T) *core.Job {
	t.Helper()
	select {
	case j := <-g.started:
		return j
	case <-time.After(10 * time.Second):
		t.Fatal("no run started within 10s")
		return nil
	}
}

func (g *gate) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.breaches) > 0 {
		t.Fatalf("breaches: %q", g.breaches)
	}
}

// inThread puts a console message into its own platform thread (conversation).
func inThread(n int) func(*core.Inbound) {
	return func(in *core.Inbound) {
		in.ThreadKey = fmt.Sprintf("console:t%d", n)
		in.Conversation = core.ConversationRef(fmt.Sprintf("c%d", n))
	}
}

func parallelTeam(n int) []core.BotProfile {
	bots := slices.Clone(team)
	bots[0].MaxParallelThreads = n // chief_of_staff, the default bot
	return bots
}

// TestParallelThreads: a bot with max_parallel_threads 3 runs three threads at
// once, never a fourth, never two runs in one thread (a message arriving in a busy
// thread waits for the run there to end, while later threads go ahead).
func TestParallelThreads(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 10})
	h.opts = func(o *core.Options) { o.Bots = parallelTeam(3) }
	g := newGate(0)
	h.agent.reply["chief_of_staff"] = g.body(nil)
	h.start()

	var threads []core.ThreadID
	num := map[core.ThreadID]int{}
	for i := 1; i <= 4; i++ {
		id := h.say(fmt.Sprintf("task %d", i), inThread(i)).Thread
		threads = append(threads, id)
		num[id] = i
	}
	running := map[core.ThreadID]bool{}
	for range 3 {
		running[g.next(t).Thread.ID] = true
	}
	if len(running) != 3 {
		t.Fatalf("three runs started in %d threads, want three different threads", len(running))
	}
	// A second message in a busy thread waits for that thread's run to end.
	busy := threads[0]
	if !running[busy] {
		busy = threads[1]
	}
	h.say("and one more thing", inThread(num[busy]))
	select {
	case j := <-g.started:
		t.Fatalf("a fourth run started (thread %d) while three ran", j.Thread.ID)
	default:
	}
	if n := len(h.runs(core.RunRunning)); n != 3 {
		t.Fatalf("%d runs running, want 3", n)
	}
	// A fifth thread arrives after that message. Free two slots: the fourth and
	// fifth threads start, skipping the busy thread's older message.
	fifth := h.say("task 5", inThread(5)).Thread
	for _, id := range threads {
		if running[id] && id != busy {
			g.release(id)
		}
	}
	got := []core.ThreadID{g.next(t).Thread.ID, g.next(t).Thread.ID}
	slices.Sort(got)
	if want := []core.ThreadID{threads[3], fifth}; !slices.Equal(got, want) {
		t.Fatalf("next runs in threads %v, want the waiting threads %v", got, want)
	}
	g.release(busy)
	second := g.next(t)
	if second.Thread.ID != busy {
		t.Fatalf("next run in thread %d, want the busy thread %d", second.Thread.ID, busy)
	}
	g.release(busy)
	g.release(threads[3])
	g.release(fifth)
	h.idle()
	g.check(t)
	if g.peak != 3 {
		t.Fatalf("peak %d runs at once, want 3", g.peak)
	}
	if len(second.Triggers) != 1 || second.Triggers[0].Text != "and one more thing" {
		t.Fatalf("second run in the busy thread has triggers %+v", second.Triggers)
	}
}

// TestParallelGlobalCap: max_concurrent_runs caps the total across bots even when
// a bot may run more threads than that.
func TestParallelGlobalCap(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 2})
	h.opts = func(o *core.Options) { o.Bots = parallelTeam(3) }
	g := newGate(2)
	h.agent.reply["chief_of_staff"] = g.body(nil)
	h.agent.reply["engineer"] = g.body(nil)
	h.start()

	a := h.say("task a", inThread(1)).Thread
	b := h.say("task b", inThread(2)).Thread
	c := h.say("task c", inThread(3)).Thread
	d := h.say("@engineer task d", inThread(4)).Thread
	first := []core.ThreadID{g.next(t).Thread.ID, g.next(t).Thread.ID}
	select {
	case j := <-g.started:
		t.Fatalf("a third run started (@%s, thread %d) with max_concurrent_runs 2", j.Bot.Handle, j.Thread.ID)
	default:
	}
	if n := len(h.runs(core.RunRunning)); n != 2 {
		t.Fatalf("%d runs running, want 2", n)
	}
	for _, id := range first {
		g.release(id)
	}
	seen := map[core.ThreadID]bool{first[0]: true, first[1]: true}
	for range 2 {
		j := g.next(t)
		seen[j.Thread.ID] = true
		g.release(j.Thread.ID)
	}
	if len(seen) != 4 || !seen[a] || !seen[b] || !seen[c] || !seen[d] {
		t.Fatalf("runs in threads %v, want one in each of %v", seen, []core.ThreadID{a, b, c, d})
	}
	h.idle()
	g.check(t)
	if g.peak != 2 {
		t.Fatalf("peak %d runs at once, want 2", g.peak)
	}
}

// TestParallelHeldHandoffAndWork: with parallel runs, a hand-off is held only by
// queued mail in its own thread and released when that thread's queue empties, and
// the work indicator pairs every start with its end per run, a thread's next run
// starting only after the previous one ended.
func TestParallelHeldHandoffAndWork(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 10})
	h.opts = func(o *core.Options) { o.Bots = parallelTeam(2) }
	g := newGate(0)
	h.agent.reply["chief_of_staff"] = g.body(func(j *core.Job) string {
		if strings.Contains(j.Triggers[len(j.Triggers)-1].Text, "hand off") {
			return "@engineer please build it"
		}
		return "noted"
	})
	engineerRan := make(chan core.ThreadID, 2)
	h.agent.reply["engineer"] = func(_ context.Context, j *core.Job) (string, error) {
		engineerRan <- j.Thread.ID
		return "ok from engineer", nil
	}
	wa := &workAdapter{recAdapter: h.ad}
	h.start2(wa)

	t1 := h.say("hand off in one", inThread(1)).Thread
	t2 := h.say("hand off in two", inThread(2)).Thread
	g.next(t)
	g.next(t)
	h.say("wait, a detail", inThread(1)) // queued behind thread one's run
	g.release(t2)                        // thread two: queue empty, hand-off goes out
	select {
	case th := <-engineerRan:
		if th != t2 {
			t.Fatalf("engineer ran in thread %d, want %d", th, t2)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the engineer's run in thread two")
	}
	g.release(t1) // thread one: held, mail still queued
	g.next(t)     // the detail's run in thread one
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer ran %d times before thread one's queue emptied, want 1", n)
	}
	g.release(t1)
	h.idle()
	g.check(t)
	eng := h.agent.jobsFor("engineer")
	if len(eng) != 2 || eng[1].Thread.ID != t1 {
		t.Fatalf("engineer runs = %d, want the held hand-off in thread %d delivered", len(eng), t1)
	}

	wa.wmu.Lock()
	defer wa.wmu.Unlock()
	open := map[core.RunID]bool{}
	openIn := map[core.ThreadID]core.RunID{}
	for _, w := range wa.work {
		if w.Started {
			if r, ok := openIn[w.Thread]; ok && w.Bot.Handle == "chief_of_staff" && r != 0 {
				t.Fatalf("run %d started in thread %d before run %d there ended: %+v", w.Run, w.Thread, r, wa.work)
			}
			open[w.Run] = true
			if w.Bot.Handle == "chief_of_staff" {
				openIn[w.Thread] = w.Run
			}
			continue
		}
		if !open[w.Run] {
			t.Fatalf("run %d ended without a start: %+v", w.Run, wa.work)
		}
		delete(open, w.Run)
		if openIn[w.Thread] == w.Run {
			delete(openIn, w.Thread)
		}
	}
	if len(open) != 0 {
		t.Fatalf("runs %v never ended: %+v", open, wa.work)
	}
}
