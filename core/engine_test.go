package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

func TestHumanMessageGetsDefaultBotReply(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	res := h.say("hello team")
	if !slices.Equal(res.Woken, []string{"chief_of_staff"}) {
		t.Fatalf("woken = %v, want [chief_of_staff]", res.Woken)
	}
	h.idle()
	got := h.ad.texts()
	if want := []string{"[chief_of_staff] ok from chief_of_staff"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q (the human's own message must not echo back)", got, want)
	}
	d := h.ad.deliveries()[0]
	if d.ReplyTo != "in1" {
		t.Errorf("ReplyTo = %q, want the trigger's platform id in1", d.ReplyTo)
	}
	done := h.runs(core.RunCompleted)
	if len(done) != 1 || done[0].Usage.ModelCalls != 1 {
		t.Fatalf("completed runs = %+v, want one with usage recorded", done)
	}
}

func TestHandoffWakesMentionedBotWithScopedView(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.agent.reply["chief_of_staff"] = func(_ context.Context, j *core.Job) (string, error) {
		if len(j.Triggers) > 0 && j.Triggers[0].Sender == "console:you" {
			return "@engineer please build the login page; report back to @chief_of_staff", nil
		}
		return "Thanks, done.", nil
	}
	h.agent.reply["engineer"] = func(_ context.Context, j *core.Job) (string, error) {
		return "@chief_of_staff built it", nil
	}
	h.start()
	h.say("we need a login page")
	h.idle()
	eng := h.agent.jobsFor("engineer")
	if len(eng) != 1 {
		t.Fatalf("engineer ran %d times, want 1", len(eng))
	}
	if !eng[0].Scoped {
		t.Error("engineer is a delegate in a two-bot thread: its job must be scoped")
	}
	if eng[0].DefaultBot != "chief_of_staff" {
		t.Errorf("DefaultBot = %q", eng[0].DefaultBot)
	}
	if tr := eng[0].Triggers; len(tr) != 1 || !strings.Contains(tr[0].Text, "@engineer") {
		t.Errorf("engineer triggers = %+v", tr)
	}
	chief := h.agent.jobsFor("chief_of_staff")
	if len(chief) != 2 || chief[1].Scoped {
		t.Fatalf("chief runs = %d (scoped=%v), want 2 unscoped", len(chief), len(chief) > 1 && chief[1].Scoped)
	}
	want := []string{
		"[chief_of_staff] @engineer please build the login page; report back to @chief_of_staff",
		"[engineer] @chief_of_staff built it",
		"[chief_of_staff] Thanks, done.",
	}
	if got := h.ad.texts(); !slices.Equal(got, want) {
		t.Fatalf("delivered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range h.ad.deliveries() {
		if d.ReplyTo != "in1" {
			t.Errorf("%s's message answers %q, want the person's message in1 that started the work", d.Sender.Handle, d.ReplyTo)
		}
	}
	ms := h.messages(eng[0].Thread.ID)
	if ms[2].Hop != 2 || ms[1].Hop != 1 || ms[0].Hop != 0 {
		t.Errorf("hops = %d,%d,%d, want 0,1,2", ms[0].Hop, ms[1].Hop, ms[2].Hop)
	}
}

func TestBotMessageHandsOffToFirstMentionOnly(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.agent.reply["chief_of_staff"] = func(_ context.Context, j *core.Job) (string, error) {
		if j.Triggers[0].Sender == "console:you" {
			return "@engineer fix these. @qa retest after the fixes", nil
		}
		return "", nil
	}
	h.agent.reply["engineer"] = func(context.Context, *core.Job) (string, error) { return "fixed", nil }
	h.start()
	h.say("bugs!")
	h.idle()
	if n := len(h.agent.jobsFor("qa")); n != 0 {
		t.Fatalf("qa ran %d times; a bot message hands off to its first mention only", n)
	}
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer ran %d times, want 1", n)
	}
	// The unmentioned reply "fixed" ends the exchange: chief is not woken again.
	if n := len(h.agent.jobsFor("chief_of_staff")); n != 1 {
		t.Fatalf("chief ran %d times, want 1", n)
	}
}

func TestHopLimitStopsPingPongWithOneNotice(t *testing.T) {
	h := newHarness(t, core.Limits{MaxBotHops: 5})
	h.agent.reply["engineer"] = func(context.Context, *core.Job) (string, error) { return "@reviewer your turn", nil }
	h.agent.reply["reviewer"] = func(context.Context, *core.Job) (string, error) { return "@engineer your turn", nil }
	h.start()
	res := h.say("@engineer start")
	h.idle()
	ms := h.messages(res.Thread)
	if n := countKind(ms, core.KindHopLimit); n != 1 {
		t.Fatalf("hop-limit notices = %d, want exactly 1", n)
	}
	runs := len(h.agent.jobsFor("engineer")) + len(h.agent.jobsFor("reviewer"))
	if runs != 5 {
		t.Fatalf("bot runs = %d, want 5 (hops 1..5, the 5th reply's hand-off dropped)", runs)
	}
	// A human message resets the brake: the ping-pong may run again, with one more notice.
	h.say("@engineer once more")
	h.idle()
	if n := countKind(h.messages(res.Thread), core.KindHopLimit); n != 2 {
		t.Fatalf("after a human message, hop-limit notices = %d, want 2", n)
	}
}

func TestMessagesWhileBusyCoalesceIntoOneRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, j *core.Job) (string, error) {
		started <- struct{}{}
		if len(h.agent.jobsFor("chief_of_staff")) == 1 {
			<-release
		}
		return "seen " + strings.Repeat("x", len(j.Triggers)), nil
	}
	h.start()
	h.say("first")
	<-started
	h.say("second")
	h.say("third")
	h.say("fourth")
	close(release)
	h.idle()
	jobs := h.agent.jobsFor("chief_of_staff")
	if len(jobs) != 2 {
		t.Fatalf("runs = %d, want 2 (the three messages that arrived while busy make one run)", len(jobs))
	}
	if n := len(jobs[1].Triggers); n != 3 {
		t.Fatalf("second run has %d triggers, want 3", n)
	}
}

// busyEngineer starts h with "@engineer open a PR", whose run answers first
// only after "@engineer also fix the typo" was queued while it worked; the
// engineer's later run answers later, the reviewer "LGTM". It returns when the
// engine is idle, with the first message's result.
func (h *harness) busyEngineer(first, later string) core.IngestResult {
	inRun := make(chan struct{}, 1)
	release := make(chan struct{})
	h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
		if len(h.agent.jobsFor("engineer")) == 1 {
			inRun <- struct{}{}
			<-release
			return first, nil
		}
		return later, nil
	}
	h.agent.reply["reviewer"] = func(context.Context, *core.Job) (string, error) { return "LGTM", nil }
	h.start()
	res := h.say("@engineer open a PR")
	<-inRun
	h.say("@engineer also fix the typo") // queued while the engineer works
	close(release)
	h.idle()
	return res
}

func TestHeldHandoffDeliveredAfterQueuedMail(t *testing.T) {
	h := newHarness(t, core.Limits{})
	res := h.busyEngineer("PR opened, @reviewer please review", "clarifications handled")
	rev := h.agent.jobsFor("reviewer")
	if len(rev) != 1 {
		t.Fatalf("reviewer ran %d times, want exactly 1 (held, then released once)", len(rev))
	}
	if got := rev[0].Triggers[0].Text; !strings.Contains(got, "PR opened") {
		t.Errorf("reviewer trigger = %q, want the held message", got)
	}
	if n := len(h.agent.jobsFor("engineer")); n != 2 {
		t.Fatalf("engineer runs = %d, want 2", n)
	}
	ms := h.messages(res.Thread)
	if n := countKind(ms, core.KindHandoffHeld); n != 1 {
		t.Fatalf("handoff_held notices = %d, want 1", n)
	}
	// The reviewer ran only after the engineer's second run (order of messages).
	var order []string
	for _, m := range ms {
		if m.Sender != core.SystemActor && m.Sender != "console:you" {
			order = append(order, string(m.Sender))
		}
	}
	want := []string{"bot:engineer", "bot:engineer", "bot:reviewer"}
	if !slices.Equal(order, want) {
		t.Fatalf("bot message order %v, want %v", order, want)
	}
}

func TestLaterRealHandoffSupersedesHold(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.busyEngineer("@reviewer first PR", "@reviewer updated PR")
	rev := h.agent.jobsFor("reviewer")
	if len(rev) != 1 {
		t.Fatalf("reviewer ran %d times, want 1: the later real hand-off supersedes the hold", len(rev))
	}
	if len(rev[0].Triggers) != 1 || !strings.Contains(rev[0].Triggers[0].Text, "updated PR") {
		t.Fatalf("reviewer triggers = %+v, want only the updated PR", rev[0].Triggers)
	}
}

func TestAgentErrorPostsNotice(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.agent.reply["chief_of_staff"] = func(context.Context, *core.Job) (string, error) {
		return "", errors.New("model server answered 500: internal error")
	}
	h.start()
	res := h.say("hi")
	h.idle()
	got := h.ad.texts()
	if len(got) != 1 || !strings.Contains(got[0], "[system]") || !strings.Contains(got[0], "500") {
		t.Fatalf("delivered %q, want one system notice naming the cause", got)
	}
	ms := h.messages(res.Thread)
	if ms[len(ms)-1].Kind != core.KindNotice {
		t.Fatalf("last message kind = %q, want notice", ms[len(ms)-1].Kind)
	}
}

func TestDuplicateDeliveryStoredOnce(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	a := h.say("@engineer hi", func(in *core.Inbound) { in.DedupKey = "slack:T:C:1.1" })
	b := h.say("@engineer hi", func(in *core.Inbound) { in.DedupKey = "slack:T:C:1.1" })
	if a.Duplicate || !b.Duplicate || a.Message != b.Message {
		t.Fatalf("first %+v second %+v: want the second to be a duplicate of the first", a, b)
	}
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer ran %d times, want 1", n)
	}
	if n := len(h.messages(a.Thread)); n != 2 {
		t.Fatalf("thread has %d messages, want 2 (one human, one reply)", n)
	}
}

func TestDuplicateFromSecondAccountWakesItsBot(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	key := func(in *core.Inbound) { in.DedupKey = "telegram:-100:7" }
	a := h.say("hello both", key, func(in *core.Inbound) { in.Mentions = []string{"engineer"} })
	b := h.say("hello both", key, func(in *core.Inbound) { in.Mentions = []string{"reviewer"} })
	if !b.Duplicate || !slices.Equal(b.Woken, []string{"reviewer"}) {
		t.Fatalf("second delivery = %+v, want duplicate waking reviewer", b)
	}
	h.idle()
	if len(h.agent.jobsFor("engineer")) != 1 || len(h.agent.jobsFor("reviewer")) != 1 {
		t.Fatal("each mentioned bot must run exactly once")
	}
	if n := len(h.messages(a.Thread)); n != 3 {
		t.Fatalf("messages = %d, want 3 (one human message stored once, two replies)", n)
	}
}

func TestRoutingEdges(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	if r := h.say("hey", func(in *core.Inbound) { in.ThreadKey, in.StartThread = "slack:T:C:9", false }); !r.Dropped {
		t.Fatalf("unmentioned message outside a known thread: %+v, want dropped", r)
	}
	r := h.say("@engineer hi")
	h.idle()
	// Single-bot thread (engineer only): an unmentioned message goes to that bot.
	r2 := h.say("and another thing")
	if !slices.Equal(r2.Woken, []string{"engineer"}) || r2.Thread != r.Thread {
		t.Fatalf("unmentioned in single-bot thread woke %v, want [engineer]", r2.Woken)
	}
	h.idle()
	r3 := h.say("@Alice what do you think?", func(in *core.Inbound) { in.MentionsHumans = true })
	if len(r3.Woken) != 0 {
		t.Fatalf("message mentioning only a human woke %v", r3.Woken)
	}
	r4 := h.say("mail me at dev@engineer.io")
	if !slices.Equal(r4.Woken, []string{"engineer"}) {
		t.Fatalf("an e-mail address is not a mention: woke %v", r4.Woken)
	}
	h.idle()
	if _, err := h.eng.Ingest(context.Background(), core.Inbound{Text: "x"}); err == nil || !strings.Contains(err.Error(), "DedupKey") {
		t.Fatalf("invalid inbound error = %v, want it to name the missing fields", err)
	}
}

func TestNewThreadAndSwitch(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	a := h.say("first task")
	b := h.say("second task", func(in *core.Inbound) { in.NewThread = true })
	if a.Thread == b.Thread {
		t.Fatal("NewThread must start a new thread")
	}
	c := h.say("back to the first", func(in *core.Inbound) { in.Thread = a.Thread })
	if c.Thread != a.Thread {
		t.Fatalf("Thread target: got thread %d, want %d", c.Thread, a.Thread)
	}
	d := h.say("still first")
	if d.Thread != a.Thread {
		t.Fatalf("the key follows the switch: got %d, want %d", d.Thread, a.Thread)
	}
	h.idle()
	ths, err := h.eng.Threads(context.Background(), 0)
	if err != nil || len(ths) != 2 {
		t.Fatalf("threads = %d (%v), want 2", len(ths), err)
	}
}

// rateLimited is a DeliveryError asking to wait.
type rateLimited struct{ wait time.Duration }

func (r rateLimited) Error() string             { return "ratelimited" }
func (r rateLimited) Permanent() bool           { return false }
func (r rateLimited) RetryAfter() time.Duration { return r.wait }

type permanent struct{}

func (permanent) Error() string             { return "channel_not_found" }
func (permanent) Permanent() bool           { return true }
func (permanent) RetryAfter() time.Duration { return 0 }

func TestDeliveryHonoursRetryAfterAndPermanentErrors(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var firstTry time.Time
	h.ad.fail = func(n int, d core.Delivery) error {
		switch {
		case strings.Contains(d.Text, "nowhere"):
			return permanent{}
		case n == 1:
			firstTry = time.Now()
			return rateLimited{wait: 300 * time.Millisecond}
		}
		return nil
	}
	h.agent.reply["chief_of_staff"] = func(_ context.Context, j *core.Job) (string, error) {
		return "reply to " + j.Triggers[0].Text, nil
	}
	h.start()
	h.say("one")
	h.idle()
	got := h.ad.texts()
	if len(got) != 1 {
		t.Fatalf("delivered %q, want exactly one message after the retry", got)
	}
	if wait := h.ad.at[0].Sub(firstTry); wait < 300*time.Millisecond {
		t.Fatalf("retried after %v, want at least the 300ms RetryAfter", wait)
	}
	before := h.ad.n
	h.say("nowhere")
	h.idle()
	if tries := h.ad.n - before; tries != 1 {
		t.Fatalf("permanent error tried %d times, want 1", tries)
	}
	var failed []core.OutboxEntry
	_ = h.store.View(context.Background(), func(tx core.ReadTx) error {
		for id := core.OutboxID(1); ; id++ {
			o, err := tx.Outbox(id)
			if err != nil {
				return nil
			}
			if o.Status == core.OutboxFailed {
				failed = append(failed, o)
			}
		}
	})
	if len(failed) != 1 || !strings.Contains(failed[0].Error, "channel_not_found") {
		t.Fatalf("failed entries = %+v, want one recording channel_not_found", failed)
	}
}
