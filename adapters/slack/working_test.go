package slack

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

const (
	workConv = core.ConversationRef("T0TEST:C0TEST001:1767225600.000100")
	trigger  = "1767225600.000200" // a reply in that thread that woke a bot
)

// workEnv is newEnv with the given linger; pending removals are flushed when the
// test ends, before the fake Slack closes.
func workEnv(t *testing.T, linger time.Duration) *env {
	t.Helper()
	e := newEnv(t, nil)
	e.a.working = newWorking(linger)
	t.Cleanup(func() { e.a.closeWorking(10 * time.Second) })
	return e
}

func work(run core.RunID, replyTo string, started bool) core.Work {
	return core.Work{Conversation: workConv, ReplyTo: replyTo, Run: run, Thread: 1,
		Bot: core.Sender{Actor: core.BotActorID("engineer"), Handle: "engineer"}, Started: started}
}

// reactions lists the reaction calls in order as "add <channel> <ts>" or
// "remove <channel> <ts>", checking the reaction name.
func reactions(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	for _, c := range e.slack.Calls() {
		op, ok := map[string]string{"reactions.add": "add", "reactions.remove": "remove"}[c.Method]
		if !ok {
			continue
		}
		if c.Form.Get("name") != WorkingReaction {
			t.Errorf("%s with name %q", c.Method, c.Form.Get("name"))
		}
		out = append(out, op+" "+c.Form.Get("channel")+" "+c.Form.Get("timestamp"))
	}
	return out
}

func wantReactions(t *testing.T, e *env, want ...string) {
	t.Helper()
	if got := reactions(t, e); !slices.Equal(got, want) {
		t.Fatalf("reaction calls\n got %q\nwant %q", got, want)
	}
}

// waitReactions waits until n reaction calls were made.
func waitReactions(t *testing.T, e *env, n int) {
	t.Helper()
	ctx := waitCtx(t)
	if err := e.slack.Wait(ctx, func(*slacktest.Server) bool { return len(reactions(t, e)) >= n }); err != nil {
		t.Fatalf("reaction calls %q, want %d", reactions(t, e), n)
	}
}

// forgotten waits for the lingering removals, pending or running (the real
// timers'), and checks the adapter then tracks no run and no message.
func forgotten(t *testing.T, e *env) {
	t.Helper()
	st := e.a.working
	st.wg.Wait()
	st.mu.Lock()
	n := len(st.msgs) + len(st.runs)
	st.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d messages or runs still tracked", n)
	}
}

// lingerTimers stands in for time.AfterFunc in the working state: the test sees
// each lingering removal that was started and fires them itself.
type lingerTimers struct {
	mu     sync.Mutex
	timers []*lingerTimer
}

type lingerTimer struct {
	d                time.Duration
	f                func()
	stopped, started bool // guarded by lingerTimers.mu
	owner            *lingerTimers
}

func (l *lingerTimer) Stop() bool {
	l.owner.mu.Lock()
	defer l.owner.mu.Unlock()
	if l.stopped || l.started {
		return false
	}
	l.stopped = true
	return true
}

// fakeLinger makes e's lingering removals wait for lingerTimers.fire.
func fakeLinger(e *env) *lingerTimers {
	lt := &lingerTimers{}
	st := e.a.working
	st.mu.Lock()
	st.afterFunc = func(d time.Duration, f func()) stopper {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		tm := &lingerTimer{d: d, f: f, owner: lt}
		lt.timers = append(lt.timers, tm)
		return tm
	}
	st.mu.Unlock()
	return lt
}

// pending is how many removals wait for their linger (neither stopped nor fired).
func (lt *lingerTimers) pending() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	n := 0
	for _, tm := range lt.timers {
		if !tm.stopped && !tm.started {
			n++
		}
	}
	return n
}

// fire lets every pending linger pass: their removals run before it returns.
func (lt *lingerTimers) fire(t *testing.T, linger time.Duration) {
	t.Helper()
	lt.mu.Lock()
	var due []*lingerTimer
	for _, tm := range lt.timers {
		if !tm.stopped && !tm.started {
			if tm.d != linger {
				t.Errorf("a removal lingers %v, want %v", tm.d, linger)
			}
			tm.started = true
			due = append(due, tm)
		}
	}
	lt.mu.Unlock()
	for _, tm := range due {
		tm.f()
	}
}

// TestWorkingReactionStartEnd: a run's start puts :eyes: on the message it answers
// before Working returns; its end takes it off after the linger, not at once.
func TestWorkingReactionStartEnd(t *testing.T) {
	const linger = 200 * time.Millisecond
	e := workEnv(t, linger)
	lt := fakeLinger(e)
	e.a.Working(t.Context(), work(1, trigger, true))
	wantReactions(t, e, "add C0TEST001 "+trigger)
	e.a.Working(t.Context(), work(1, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger) // still lingering
	if n := lt.pending(); n != 1 {
		t.Fatalf("%d removals wait for the linger, want 1", n)
	}
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
	forgotten(t, e)
}

// TestWorkingReactionUntilLastRunEnds: two bots on one trigger share one reaction,
// taken off only after the second ends; another trigger has its own.
func TestWorkingReactionUntilLastRunEnds(t *testing.T) {
	const linger = 50 * time.Millisecond
	e := workEnv(t, linger)
	lt := fakeLinger(e)
	const other = "1767225600.000300"
	e.a.Working(t.Context(), work(1, trigger, true))
	e.a.Working(t.Context(), work(2, trigger, true))
	e.a.Working(t.Context(), work(3, other, true))
	wantReactions(t, e, "add C0TEST001 "+trigger, "add C0TEST001 "+other)
	e.a.Working(t.Context(), work(1, trigger, false))
	e.a.Working(t.Context(), work(1, trigger, false)) // a repeated end changes nothing
	if n := lt.pending(); n != 0 {
		t.Fatalf("%d removals started while run 2 works on the message", n)
	}
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger, "add C0TEST001 "+other)
	e.a.Working(t.Context(), work(2, trigger, false))
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger, "add C0TEST001 "+other, "remove C0TEST001 "+trigger)
	e.a.Working(t.Context(), work(3, other, false))
	lt.fire(t, linger)
	waitReactions(t, e, 4)
	forgotten(t, e)
}

// TestWorkingReactionSurvivesHandOff: the chief ends and the engineer it handed off
// to starts (core gives the engineer's run no ReplyTo: its trigger is the chief's
// message): the reaction stays on the human's message, without flicker, until the
// engineer ends. A paused run that resumes does the same.
func TestWorkingReactionSurvivesHandOff(t *testing.T) {
	const linger = 300 * time.Millisecond
	e := workEnv(t, linger)
	lt := fakeLinger(e)
	e.a.Working(t.Context(), work(1, trigger, true))
	e.a.Working(t.Context(), work(1, trigger, false))
	e.a.Working(t.Context(), work(2, "", true)) // the hand-off: the removal is stopped
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger)
	e.a.Working(t.Context(), work(2, "", false)) // pauses for a person
	e.a.Working(t.Context(), work(2, "", true))  // resumes
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger)
	e.a.Working(t.Context(), work(2, "", false))
	lt.fire(t, linger)
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
	forgotten(t, e)
}

// TestWorkingReactionWithoutReplyTo: with no trigger known, the thread root is
// marked; a top-level DM without one shows nothing; a malformed ref is ignored.
func TestWorkingReactionWithoutReplyTo(t *testing.T) {
	e := workEnv(t, 0)
	e.a.Working(t.Context(), work(1, "", true))
	e.a.Working(t.Context(), work(1, "", false))
	wantReactions(t, e, "add C0TEST001 1767225600.000100", "remove C0TEST001 1767225600.000100")

	dm := work(2, "", true)
	dm.Conversation = "T0TEST:D0TEST001"
	e.a.Working(t.Context(), dm)
	dm.ReplyTo = "1767225600.000500"
	dm.Run = 3
	e.a.Working(t.Context(), dm)
	bad := work(4, trigger, true)
	bad.Conversation = "nonsense"
	e.a.Working(t.Context(), bad)
	wantReactions(t, e, "add C0TEST001 1767225600.000100", "remove C0TEST001 1767225600.000100",
		"add D0TEST001 1767225600.000500")
}

// TestWorkingReactionErrors: already_reacted and no_reaction are fine; a refused
// add (missing scope) means there is nothing to remove.
func TestWorkingReactionErrors(t *testing.T) {
	e := workEnv(t, 0)
	e.slack.FailNext("reactions.add", http.StatusOK, "already_reacted", 0)
	e.slack.FailNext("reactions.remove", http.StatusOK, "no_reaction", 0)
	e.a.Working(t.Context(), work(1, trigger, true))
	e.a.Working(t.Context(), work(1, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)

	e.slack.FailNext("reactions.add", http.StatusOK, "missing_scope", 0)
	e.a.Working(t.Context(), work(2, trigger, true))
	e.a.Working(t.Context(), work(2, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger, "add C0TEST001 "+trigger)
	forgotten(t, e)
}

// TestWorkingReactionBoundedByCtx: a hanging reactions.add does not hold Working
// past its ctx; as the add may have worked, the end still removes the reaction.
func TestWorkingReactionBoundedByCtx(t *testing.T) {
	e := workEnv(t, 0)
	release := e.slack.Hold("reactions.add")
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.a.Working(ctx, work(1, trigger, true))
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Working took %v with a 200ms ctx", d)
	}
	release()
	e.a.Working(t.Context(), work(1, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
}

// TestWorkingReactionShutdown: when Run returns, a lingering removal is done at
// once, and later starts show nothing.
func TestWorkingReactionShutdown(t *testing.T) {
	e := workEnv(t, time.Hour)
	e.a.Working(t.Context(), work(1, trigger, true))
	e.a.Working(t.Context(), work(1, trigger, false))
	e.a.closeWorking(10 * time.Second)
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
	e.a.Working(t.Context(), work(2, trigger, true))
	e.a.Working(t.Context(), work(2, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
}

// TestWorkingReactionAfterRunStartsAgain: Run may start again after it returned
// (a process that takes an account's ingress lease back, DESIGN.md §7): work is
// shown again.
func TestWorkingReactionAfterRunStartsAgain(t *testing.T) {
	e := workEnv(t, 0)
	e.a.closeWorking(10 * time.Second)
	e.a.openWorking()
	e.a.Working(t.Context(), work(3, trigger, true))
	e.a.Working(t.Context(), work(3, trigger, false))
	wantReactions(t, e, "add C0TEST001 "+trigger, "remove C0TEST001 "+trigger)
}

// TestWorkingReactionConcurrent: many runs starting and ending on one message at
// once settle on no reaction, the last call a removal.
func TestWorkingReactionConcurrent(t *testing.T) {
	e := workEnv(t, 5*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 10 {
				run := core.RunID(g*100 + i + 1)
				e.a.Working(t.Context(), work(run, trigger, true))
				for range i % 3 { // vary how far the others get in between
					runtime.Gosched()
				}
				e.a.Working(t.Context(), work(run, trigger, false))
			}
		})
	}
	wg.Wait()
	forgotten(t, e)
	got := reactions(t, e)
	if len(got) == 0 || got[len(got)-1] != "remove C0TEST001 "+trigger {
		t.Fatalf("reaction calls end with %q, want a removal", got[max(0, len(got)-3):])
	}
	for i, c := range got { // add and remove alternate
		if want := map[bool]string{true: "add", false: "remove"}[i%2 == 0]; c != fmt.Sprintf("%s C0TEST001 %s", want, trigger) {
			t.Fatalf("call %d = %q in %q", i, c, got)
		}
	}
}

// TestIngestAndDeliverLeaveReactionsAlone: reactions follow core's Working calls
// only; waking a bot or delivering a reply does not touch them.
func TestIngestAndDeliverLeaveReactionsAlone(t *testing.T) {
	e := workEnv(t, 0)
	e.engine.woken = []string{"engineer"}
	e.postEvent(t, "events_api_app_mention_channel.json")
	if _, err := e.a.Deliver(t.Context(), delivery("done")); err != nil {
		t.Fatal(err)
	}
	wantReactions(t, e)
}
