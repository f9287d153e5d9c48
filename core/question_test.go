package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// questionAdapter is recAdapter plus buttons: it records posted and resolved questions.
type questionAdapter struct {
	*recAdapter
	qmu      sync.Mutex
	posted   []core.QuestionDelivery
	resolved []core.QuestionDelivery
	// resolvedOne gets a value per resolved question, when it has room.
	resolvedOne chan struct{}
}

func (q *questionAdapter) PostQuestion(_ context.Context, d core.QuestionDelivery) (string, error) {
	q.qmu.Lock()
	defer q.qmu.Unlock()
	q.posted = append(q.posted, d)
	return fmt.Sprintf("q%d", len(q.posted)), nil
}

func (q *questionAdapter) ResolveQuestion(_ context.Context, d core.QuestionDelivery) error {
	q.qmu.Lock()
	defer q.qmu.Unlock()
	q.resolved = append(q.resolved, d)
	select {
	case q.resolvedOne <- struct{}{}:
	default:
	}
	return nil
}

func (q *questionAdapter) snapshot() (posted, resolved []core.QuestionDelivery) {
	q.qmu.Lock()
	defer q.qmu.Unlock()
	return append([]core.QuestionDelivery(nil), q.posted...), append([]core.QuestionDelivery(nil), q.resolved...)
}

// approvalScript pauses the engineer's first run for approval of shell, and on
// resume replies with what it learned; ran counts approved executions.
func approvalScript(h *harness) *int {
	ran := new(int)
	h.agent.reply["engineer"] = func(_ context.Context, j *core.Job) (string, error) {
		return "", nil
	}
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Bot.Handle != "engineer" {
			return core.Result{}, false
		}
		if j.Resume == nil {
			return core.Result{Pause: &core.Pause{Kind: core.QuestionApproval, Text: "@engineer wants to run shell", Tool: "shell",
				Args: json.RawMessage(`{"command":"make deploy"}`), CallID: "call_1"}, Checkpoint: json.RawMessage(`{"v":1}`)}, true
		}
		if string(j.Run.Checkpoint) != `{"v":1}` {
			return core.Result{}, false
		}
		if j.Resume.Approved() {
			*ran++
			return core.Result{Reply: "deployed (" + j.Resume.Decision() + ")"}, true
		}
		return core.Result{Reply: "not deployed: " + j.Resume.Decision()}, true
	}
	return ran
}

func newQuestionHarness(t *testing.T, approvers ...core.ActorID) *harness {
	h := newHarness(t, core.Limits{})
	h.qad = &questionAdapter{recAdapter: h.ad, resolvedOne: make(chan struct{}, 16)}
	// These tests are about the mechanics of questions: the person who asks
	// may approve (self_approve). Who may approve is core/people_test.go's.
	h.opts = func(o *core.Options) { o.Approvers, o.SelfApprove = approvers, true }
	return h
}

func TestApprovalApprovedRunsOnceAndResolves(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	ran := approvalScript(h)
	h.start()
	res := h.say("@engineer deploy please")
	h.idle()
	posted, _ := h.qad.snapshot()
	if len(posted) != 1 || posted[0].Question.Tool != "shell" || posted[0].ReplyTo == "" {
		t.Fatalf("posted questions = %+v, want one approval of shell replying to the trigger", posted)
	}
	q := posted[0].Question
	if len(q.Token) != 12 || q.ArgsHash == "" || q.Status != core.QuestionPending {
		t.Fatalf("question = %+v", q)
	}
	if runs := h.runs(core.RunWaitingHuman); len(runs) != 1 || runs[0].Question != q.ID {
		t.Fatalf("waiting runs = %+v", runs)
	}
	r, err := h.eng.Answer(context.Background(), core.Answer{Token: q.Token, Choice: core.ChoiceApprove, Actor: "console:you", Name: "You", Account: "console/local"})
	if err != nil || r.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", r, err)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("approved tool ran %d times, want 1", *ran)
	}
	_, resolved := h.qad.snapshot()
	if len(resolved) != 1 || resolved[0].PlatformID != "q1" || resolved[0].Question.Decision() != "Approved by You" {
		t.Fatalf("resolved = %+v, want the post q1 updated with the decision", resolved)
	}
	ms := h.messages(res.Thread)
	if last := ms[len(ms)-1]; last.Text != "deployed (Approved by You)" {
		t.Fatalf("last message %q", last.Text)
	}
	done := h.runs(core.RunWaitingHuman)
	if len(done) != 0 {
		t.Fatalf("still waiting: %+v", done)
	}
	// The same run id continued: one run for the engineer in all.
	if n := len(h.agent.jobsFor("engineer")); n != 2 {
		t.Fatalf("engineer jobs = %d, want 2 (ask, resume)", n)
	}
	if a, b := h.agent.jobsFor("engineer")[0].Run.ID, h.agent.jobsFor("engineer")[1].Run.ID; a != b {
		t.Fatalf("resume ran under run %d, want the same run %d", b, a)
	}
	// A second click is told it was decided; nothing runs again.
	r, _ = h.eng.Answer(context.Background(), core.Answer{Token: q.Token, Choice: core.ChoiceReject, Actor: "console:you"})
	if r.Outcome != core.AnswerDecided || r.Question.Decision() != "Approved by You" {
		t.Fatalf("second answer = %+v", r)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("tool ran %d times after a second click", *ran)
	}
}

func TestApprovalAuthorization(t *testing.T) {
	h := newQuestionHarness(t, "slack:T:boss")
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	posted, _ := h.qad.snapshot()
	tok := posted[0].Question.Token
	for _, who := range []core.ActorID{"console:you", "", "bot:engineer"} {
		r, err := h.eng.Answer(context.Background(), core.Answer{Token: tok, Choice: core.ChoiceApprove, Actor: who})
		if err != nil || r.Outcome != core.AnswerForbidden {
			t.Fatalf("answer by %q = %+v, %v; want forbidden", who, r, err)
		}
	}
	if r, _ := h.eng.Answer(context.Background(), core.Answer{Token: "nope", Choice: 0, Actor: "slack:T:boss"}); r.Outcome != core.AnswerUnknown {
		t.Fatalf("unknown token = %+v", r)
	}
	if r, _ := h.eng.Answer(context.Background(), core.Answer{Token: tok, Choice: 7, Actor: "slack:T:boss"}); r.Outcome != core.AnswerUnknown {
		t.Fatalf("bad choice = %+v", r)
	}
	h.idle()
	if *ran != 0 {
		t.Fatal("a refused answer ran the tool")
	}
	// Two approvers at once: exactly one wins.
	var wg sync.WaitGroup
	outcomes := make(chan core.AnswerOutcome, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.eng.Answer(context.Background(), core.Answer{Token: tok, Choice: core.ChoiceApprove, Actor: "slack:T:boss", Name: "Boss"})
			if err != nil {
				t.Error(err)
			}
			outcomes <- r.Outcome
		}()
	}
	wg.Wait()
	close(outcomes)
	accepted := 0
	for o := range outcomes {
		if o == core.AnswerAccepted {
			accepted++
		} else if o != core.AnswerDecided {
			t.Errorf("outcome %q", o)
		}
	}
	h.idle()
	if accepted != 1 || *ran != 1 {
		t.Fatalf("accepted %d answers, tool ran %d times; want 1 and 1", accepted, *ran)
	}
}

func TestThreadParkedWhileWaiting(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	approvalScript(h)
	h.start()
	a := h.say("@engineer deploy please")
	h.idle()
	h.say("@engineer are you there?")                                                         // same thread: parked
	b := h.say("@engineer other task", func(in *core.Inbound) { in.ThreadKey = "console:b" }) // another thread
	h.idle()
	jobs := h.agent.jobsFor("engineer")
	if len(jobs) != 2 || jobs[1].Thread.ID != b.Thread {
		t.Fatalf("engineer jobs = %d; the other thread must be answered while the first is parked", len(jobs))
	}
	posted, _ := h.qad.snapshot()
	if _, err := h.eng.Answer(context.Background(), core.Answer{Token: posted[0].Question.Token, Choice: core.ChoiceReject, Actor: "console:you", Name: "You"}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	jobs = h.agent.jobsFor("engineer")
	if len(jobs) != 4 {
		t.Fatalf("engineer jobs = %d, want 4 (ask, other thread, resume, then the parked message)", len(jobs))
	}
	if jobs[2].Resume == nil || jobs[3].Thread.ID != a.Thread || !strings.Contains(jobs[3].Triggers[0].Text, "are you there") {
		t.Fatalf("after the answer: resume first, then the parked message; got %+v / %+v", jobs[2].Resume, jobs[3].Triggers)
	}
	ms := h.messages(a.Thread)
	found := false
	for _, m := range ms {
		if m.Text == "not deployed: Rejected by You" {
			found = true
		}
	}
	if !found {
		t.Fatal("the rejection did not reach the run")
	}
}

func TestQuestionSurvivesRestart(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	posted, _ := h.qad.snapshot()
	tok := posted[0].Question.Token
	h.stop()
	h.start()
	h.idle()
	if n := len(h.runs(core.RunWaitingHuman)); n != 1 {
		t.Fatalf("waiting runs after restart = %d, want 1", n)
	}
	if r, err := h.eng.Answer(context.Background(), core.Answer{Token: tok, Choice: core.ChoiceApprove, Actor: "console:you", Name: "You"}); err != nil || r.Outcome != core.AnswerAccepted {
		t.Fatalf("answer after restart = %+v, %v", r, err)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("tool ran %d times, want 1", *ran)
	}
	_, resolved := h.qad.snapshot()
	if len(resolved) != 1 || resolved[0].PlatformID != "q1" {
		t.Fatalf("resolved = %+v: the post from before the restart must be updated", resolved)
	}
}

func TestQuestionExpiryRejects(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	h.opts = func(o *core.Options) {
		o.ApprovalTimeout, o.ExpiryInterval, o.SelfApprove = 50*time.Millisecond, 10*time.Millisecond, true
	}
	ran := approvalScript(h)
	h.start()
	res := h.say("@engineer deploy please")
	select {
	case <-h.qad.resolvedOne: // the expiry resolved the question's post
	case <-time.After(10 * time.Second):
		t.Fatal("the expired question was not resolved")
	}
	h.idle()
	if *ran != 0 {
		t.Fatal("an expired approval ran the tool")
	}
	ms := h.messages(res.Thread)
	if last := ms[len(ms)-1].Text; !strings.Contains(last, "Expired") {
		t.Fatalf("last message %q, want the run to continue with the expiry", last)
	}
}

func TestAskHumanAnsweredByReply(t *testing.T) {
	h := newQuestionHarness(t) // no approvers: humans who posted in the thread
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Bot.Handle != "qa" {
			return core.Result{}, false
		}
		if j.Resume == nil {
			return core.Result{Pause: &core.Pause{Kind: core.QuestionAsk, Text: "Which environment?", CallID: "c1"}, Checkpoint: json.RawMessage(`{}`)}, true
		}
		return core.Result{Reply: "testing on " + j.Resume.Answer + " (answered by " + j.Resume.AnsweredByName + ")"}, true
	}
	h.start()
	res := h.say("@qa run the smoke tests")
	h.idle()
	h.say("staging")
	h.idle()
	jobs := h.agent.jobsFor("qa")
	if len(jobs) != 2 || jobs[1].Resume == nil {
		t.Fatalf("qa jobs = %d; the reply must resume the run, not start a new one", len(jobs))
	}
	ms := h.messages(res.Thread)
	if last := ms[len(ms)-1].Text; last != "testing on staging (answered by you)" {
		t.Fatalf("last message %q", last)
	}
	if n := len(h.agent.jobsFor("chief_of_staff")); n != 0 {
		t.Fatalf("the answer woke the chief %d times", n)
	}
}

func TestQuestionWithoutButtonsFallsBackToText(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) { o.SelfApprove = true }
	approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	got := h.ad.texts()
	if len(got) != 1 || !strings.Contains(got[0], "Options: Approve / Reject") || !strings.Contains(got[0], "make deploy") {
		t.Fatalf("delivered %q, want the question as text", got)
	}
}

func TestPrettyArgs(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`{"command":"echo x \u003e\u003e ran.txt \u0026\u0026 ls \u003Cin"}`, "{\n  \"command\": \"echo x >> ran.txt && ls <in\"\n}"},
		{`{"a":"\\u003e stays"}`, "{\n  \"a\": \"\\\\u003e stays\"\n}"},
		{`{"s":"\"\u00e9\n"}`, "{\n  \"s\": \"\\\"\\u00e9\\n\"\n}"},
		{`not json`, `not json`},
	} {
		if got := (core.Question{Args: json.RawMessage(tt.raw)}).PrettyArgs(); got != tt.want {
			t.Errorf("PrettyArgs(%s) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

// TestAnswerAfterDeadlineIsRefused: a question past its deadline that the sweep has
// not reached yet expires when someone answers it, and nothing runs.
func TestAnswerAfterDeadlineIsRefused(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	clock := &fakeClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	h.opts = func(o *core.Options) {
		o.Approvers, o.Clock, o.SelfApprove = []core.ActorID{"console:you"}, clock, true
		o.ApprovalTimeout, o.ExpiryInterval = time.Hour, 24*time.Hour // the sweep never runs in time
	}
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	posted, _ := h.qad.snapshot()
	clock.advance(2 * time.Hour) // past the one-hour deadline
	r, err := h.eng.Answer(context.Background(), core.Answer{Token: posted[0].Question.Token, Choice: core.ChoiceApprove, Actor: "console:you"})
	if err != nil || r.Outcome != core.AnswerDecided || r.Question.Status != core.QuestionExpired {
		t.Fatalf("late answer = %+v, %v; want decided as expired", r, err)
	}
	h.idle()
	if *ran != 0 {
		t.Fatal("a late approval ran the tool")
	}
}

// fakeClock is a settable core.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
