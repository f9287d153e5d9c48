package core_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"openbot/core"
)

// TestGlobalRunCap: with max_concurrent_runs 2, four bots woken at once never run
// more than two at a time (seed §5), and all four finish.
func TestGlobalRunCap(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 2})
	var now, peak atomic.Int32
	two := make(chan struct{}) // closed when two runs are in flight at once
	var twoOnce sync.Once
	slow := func(ctx context.Context, j *core.Job) (string, error) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == 2 {
			twoOnce.Do(func() { close(two) })
		}
		// Hold the run until a second one runs beside it (the cap allows two), so
		// the peak is reached however slow the machine; the assertion is on the count.
		select {
		case <-two:
		case <-ctx.Done():
		}
		now.Add(-1)
		return "", nil
	}
	for _, b := range team {
		h.agent.reply[b.Handle] = slow
	}
	h.start()
	h.say("@chief_of_staff @engineer @reviewer @qa everyone please")
	h.idle()
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrent runs = %d, want exactly the cap 2", p)
	}
	for _, b := range team {
		if n := len(h.agent.jobsFor(b.Handle)); n != 1 {
			t.Fatalf("%s ran %d times", b.Handle, n)
		}
	}
}

// TestParticipantsAndSystemMessages: mentioned bots join the thread even when they
// are not woken (a bot hands off to its first mention only), and a system notice
// that mentions bots wakes none of them.
func TestParticipantsAndSystemMessages(t *testing.T) {
	h := newHarness(t, core.Limits{MaxBotHops: 1})
	h.agent.reply["chief_of_staff"] = func(context.Context, *core.Job) (string, error) {
		return "@engineer build it, then @qa tests it", nil
	}
	h.agent.reply["engineer"] = func(context.Context, *core.Job) (string, error) { return "@reviewer look", nil }
	h.start()
	res := h.say("new feature please")
	h.idle()
	var th core.Thread
	_ = h.store.View(context.Background(), func(tx core.ReadTx) error {
		var err error
		th, err = tx.Thread(res.Thread)
		return err
	})
	for _, b := range []string{"chief_of_staff", "engineer", "qa"} {
		if !th.HasParticipant(core.BotActorID(b)) {
			t.Errorf("@%s was mentioned but is not a participant: %v", b, th.Participants)
		}
	}
	if n := len(h.agent.jobsFor("qa")); n != 0 {
		t.Fatalf("qa ran %d times; only the first mention is woken", n)
	}
	// The engineer's reply at hop 2 exceeds max_bot_hops 1: a system notice follows,
	// and the notice (which mentions nobody to wake) leaves the reviewer asleep.
	ms := h.messages(res.Thread)
	if countKind(ms, core.KindHopLimit) != 1 || len(h.agent.jobsFor("reviewer")) != 0 {
		t.Fatalf("hop-limit notices %d, reviewer runs %d; want 1 and 0", countKind(ms, core.KindHopLimit), len(h.agent.jobsFor("reviewer")))
	}
}

// TestPostMessageRoutesLikeAReply: a bot's mid-run post_message that mentions a bot
// hands off like a reply (seed §4.1 through RunEnv.Post).
func TestPostMessageRoutesLikeAReply(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var once sync.Once
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, j *core.Job) (string, error) {
		var err error
		once.Do(func() { _, err = j.Env.Post(ctx, "progress: @qa please prepare the test plan") })
		return "working on it", err
	}
	h.start()
	res := h.say("big task")
	h.idle()
	qa := h.agent.jobsFor("qa")
	if len(qa) != 1 || !strings.Contains(qa[0].Triggers[0].Text, "test plan") {
		t.Fatalf("qa runs = %d, want one woken by the mid-run post", len(qa))
	}
	var texts []string
	for _, m := range h.messages(res.Thread) {
		texts = append(texts, m.Text)
	}
	if !slices.Contains(texts, "progress: @qa please prepare the test plan") || !slices.Contains(texts, "working on it") {
		t.Fatalf("thread = %q", texts)
	}
	if got := h.ad.texts(); !slices.Contains(got, "[chief_of_staff] progress: @qa please prepare the test plan") {
		t.Fatalf("the progress note was not delivered: %q", got)
	}
}

// workAdapter records WorkIndicator calls.
type workAdapter struct {
	*recAdapter
	wmu  sync.Mutex
	work []core.Work
}

func (w *workAdapter) Working(_ context.Context, x core.Work) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.work = append(w.work, x)
}

// TestWorkIndicator: an adapter that shows work hears a start before the run and
// an end after it, answering the trigger, for the bot that runs.
func TestWorkIndicator(t *testing.T) {
	h := newHarness(t, core.Limits{})
	wa := &workAdapter{recAdapter: h.ad}
	h.start2(wa)
	h.say("hello")
	h.idle()
	wa.wmu.Lock()
	defer wa.wmu.Unlock()
	if len(wa.work) != 2 || !wa.work[0].Started || wa.work[1].Started {
		t.Fatalf("work calls = %+v, want start then end", wa.work)
	}
	if w := wa.work[0]; w.Bot.Handle != "chief_of_staff" || w.ReplyTo != "in1" || w.Conversation != "main" {
		t.Fatalf("start = %+v", w)
	}
}
