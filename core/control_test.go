package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"openbot/core"
	"openbot/core/storetest"
)

// blockingScript makes handle's runs checkpoint a step and then block until
// their context ends; entered receives each blocked run's id and ended its
// context's error.
func blockingScript(h *harness, handle string) (entered chan core.RunID, ended chan error) {
	entered, ended = make(chan core.RunID, 8), make(chan error, 8)
	h.agent.reply[handle] = func(ctx context.Context, j *core.Job) (string, error) {
		if err := j.Env.Checkpoint(ctx, json.RawMessage(`{"step":1}`)); err != nil {
			return "", err
		}
		entered <- j.Run.ID
		<-ctx.Done()
		ended <- ctx.Err()
		return "", ctx.Err()
	}
	return entered, ended
}

func (h *harness) run(id core.RunID) core.Run {
	h.t.Helper()
	return storetest.Read(h.t, h.store, func(tx core.ReadTx) (core.Run, error) { return tx.Run(id) })
}

func (h *harness) activityHas(event, text string) bool {
	h.t.Helper()
	var found bool
	if err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		as, err := tx.Activities(0, 0)
		for _, a := range as {
			if a.Event == event && strings.Contains(a.Summary, text) {
				found = true
			}
		}
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return found
}

// TestCancelRunningRun: CancelRun interrupts a run blocked mid-step, the run ends
// cancelled with a notice naming who stopped it and an activity line, and the
// next start does not resume it although it had a step checkpoint.
func TestCancelRunningRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	entered, ended := blockingScript(h, "engineer")
	h.start()
	res := h.say("@engineer long job")
	id := <-entered
	r, err := h.eng.CancelRun(context.Background(), id, core.By{Actor: "slack:T1:OPS", Name: "Olga", Via: "admin/api"})
	if err != nil || r.Status != core.RunCancelled {
		t.Fatalf("CancelRun = %+v, %v", r, err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("run context ended with %v, want canceled", err)
	}
	h.idle()
	if got := h.run(id); got.Status != core.RunCancelled || len(got.Checkpoint) != 0 || got.Error != "cancelled by Olga" {
		t.Fatalf("run = %s %q checkpoint %d bytes", got.Status, got.Error, len(got.Checkpoint))
	}
	texts := strings.Join(h.ad.texts(), "\n")
	if !strings.Contains(texts, "@engineer's work here was stopped by Olga.") || strings.Contains(texts, "could not finish") {
		t.Fatalf("delivered:\n%s", texts)
	}
	if !h.activityHas("run.cancelled", "cancelled by Olga via admin/api") {
		t.Error("no run.cancelled activity naming Olga")
	}
	if _, err := h.eng.CancelRun(context.Background(), id, core.By{Name: "Olga"}); !errors.Is(err, core.ErrRunFinished) {
		t.Errorf("second cancel: %v, want ErrRunFinished", err)
	}
	h.stop()
	h.start()
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer jobs after restart = %d, want 1 (a cancelled run is not resumed)", n)
	}
	if countKind(h.messages(res.Thread), core.KindNotice) != 1 {
		t.Errorf("thread = %+v", h.messages(res.Thread))
	}
}

// TestCancelOnlyThatThread: with parallel threads, cancelling one run leaves the
// bot's run in another thread going.
func TestCancelOnlyThatThread(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var mu sync.Mutex
	release := make(chan struct{})
	entered := make(chan core.RunID, 4)
	h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
		entered <- j.Run.ID
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-release:
			mu.Lock()
			defer mu.Unlock()
			return "finished " + j.Triggers[0].Text, nil
		}
	}
	h.opts = func(o *core.Options) {
		o.Bots = append([]core.BotProfile(nil), team...)
		o.Bots[1].MaxParallelThreads = 2
	}
	h.start()
	h.say("@engineer A")
	h.say("@engineer B", func(in *core.Inbound) { in.ThreadKey, in.Conversation = "console:other", "other" })
	first, second := <-entered, <-entered
	if _, err := h.eng.CancelRun(context.Background(), first, core.By{Name: "Olga"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.idle()
	if a, b := h.run(first).Status, h.run(second).Status; a != core.RunCancelled || b != core.RunCompleted {
		t.Fatalf("runs = %s, %s; want cancelled, completed", a, b)
	}
}

// TestCancelWaitingRun: a run waiting for an approval can be cancelled: the
// question closes as "Cancelled by Olga" with its buttons resolved, the
// approval records that it did not run, and a later click changes nothing.
func TestCancelWaitingRun(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	waiting := h.runs(core.RunWaitingHuman)
	if len(waiting) != 1 {
		t.Fatalf("waiting = %+v", waiting)
	}
	if _, err := h.eng.CancelRun(context.Background(), waiting[0].ID, core.By{Actor: "console:you", Name: "Olga"}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	_, resolved := h.qad.snapshot()
	if len(resolved) != 1 || resolved[0].Question.Decision() != "Cancelled by Olga" {
		t.Fatalf("resolved = %+v", resolved)
	}
	q := resolved[0].Question
	if q.Status != core.QuestionExpired || !strings.HasPrefix(q.Outcome, "not run: the run was cancelled by Olga") {
		t.Fatalf("question = %s outcome %q", q.Status, q.Outcome)
	}
	r, err := h.eng.Answer(context.Background(), core.Answer{Token: q.Token, Choice: core.ChoiceApprove, Actor: "console:you"})
	if err != nil || r.Outcome != core.AnswerDecided {
		t.Fatalf("late click = %+v, %v", r, err)
	}
	h.idle()
	if *ran != 0 || h.run(waiting[0].ID).Status != core.RunCancelled {
		t.Fatalf("ran %d, run %s", *ran, h.run(waiting[0].ID).Status)
	}
}

// TestPauseHoldsWorkUntilResume: a paused bot starts nothing while its mailbox
// fills, stays paused across a restart, and works the held message on resume.
func TestPauseHoldsWorkUntilResume(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	by := core.By{Actor: "slack:T1:OPS", Name: "Olga"}
	if err := h.eng.PauseBot(context.Background(), "nobody", by); !errors.Is(err, core.ErrUnknownBot) {
		t.Fatalf("pause unknown bot: %v", err)
	}
	if err := h.eng.PauseBot(context.Background(), "engineer", by); err != nil {
		t.Fatal(err)
	}
	h.say("@engineer build it")
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 0 {
		t.Fatalf("paused bot ran %d jobs", n)
	}
	h.stop()
	h.start()
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 0 {
		t.Fatalf("paused bot ran %d jobs after a restart", n)
	}
	if err := h.eng.ResumeBot(context.Background(), "engineer", by); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("resumed bot ran %d jobs, want 1", n)
	}
	if !h.activityHas("bot.paused", "@engineer paused by Olga") || !h.activityHas("bot.resumed", "@engineer resumed by Olga") {
		t.Error("pause and resume are not in the activity log")
	}
}

// TestStopQueuedClearsThread: StopQueued drops the bot's queued items in one
// thread only; its items in another thread still run.
func TestStopQueuedClearsThread(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	by := core.By{Name: "Olga"}
	if err := h.eng.PauseBot(context.Background(), "engineer", by); err != nil {
		t.Fatal(err)
	}
	a := h.say("@engineer one")
	h.say("@engineer two")
	h.say("@engineer elsewhere", func(in *core.Inbound) { in.ThreadKey, in.Conversation = "console:other", "other" })
	h.idle()
	st, err := h.eng.StopQueued(context.Background(), "engineer", a.Thread, by)
	if err != nil || st.Items != 2 || len(st.Runs) != 0 {
		t.Fatalf("StopQueued = %+v, %v", st, err)
	}
	if err := h.eng.ResumeBot(context.Background(), "engineer", by); err != nil {
		t.Fatal(err)
	}
	h.idle()
	jobs := h.agent.jobsFor("engineer")
	if len(jobs) != 1 || jobs[0].Thread.ID == a.Thread {
		t.Fatalf("engineer jobs = %d (thread %v), want 1 in the other thread", len(jobs), jobs)
	}
	if _, err := h.eng.StopQueued(context.Background(), "ghost", a.Thread, by); !errors.Is(err, core.ErrUnknownBot) {
		t.Errorf("unknown bot: %v", err)
	}
}

// TestStopCommand: /stop by the person who asked cancels the bot's run in that
// thread with the notice; by someone else it is refused and nothing changes;
// with approvers configured only they may.
func TestStopCommand(t *testing.T) {
	for _, tc := range []struct {
		name      string
		approvers []core.ActorID
		who       core.ActorID
		want      core.StopOutcome
	}{
		{"asker", nil, "console:you", core.StopDone},
		{"stranger", nil, "console:eve", core.StopForbidden},
		{"approver", []core.ActorID{"console:boss"}, "console:boss", core.StopDone},
		{"asker but approvers set", []core.ActorID{"console:boss"}, "console:you", core.StopForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, core.Limits{})
			h.opts = func(o *core.Options) { o.Approvers = tc.approvers }
			entered, _ := blockingScript(h, "engineer")
			h.start()
			h.say("@engineer long job")
			id := <-entered
			res, err := h.eng.Stop(context.Background(), core.StopRequest{ThreadKey: "console:main", Actor: tc.who, Name: "Someone", Account: "console/local"})
			if err != nil || res.Outcome != tc.want {
				t.Fatalf("Stop = %+v, %v; want outcome %v", res, err, tc.want)
			}
			if tc.want == core.StopForbidden {
				if got := h.run(id).Status; got != core.RunRunning {
					t.Fatalf("refused stop changed the run to %s", got)
				}
				if _, err := h.eng.CancelRun(context.Background(), id, core.By{Name: "test"}); err != nil {
					t.Fatal(err)
				}
				return
			}
			h.idle()
			if got := h.run(id).Status; got != core.RunCancelled || len(res.Bots) != 1 || res.Bots[0] != "engineer" {
				t.Fatalf("run %s, result %+v", got, res)
			}
			if !strings.Contains(core.StopReply(res), "@engineer") {
				t.Errorf("reply %q", core.StopReply(res))
			}
		})
	}
	t.Run("nothing", func(t *testing.T) {
		h := newHarness(t, core.Limits{})
		h.start()
		res, err := h.eng.Stop(context.Background(), core.StopRequest{ThreadKey: "console:none", Actor: "console:you"})
		if err != nil || res.Outcome != core.StopNothing {
			t.Fatalf("Stop = %+v, %v", res, err)
		}
	})
}

// TestCancelWhileCarryingOutApproval: a run resumed with an approved call and
// cancelled while carrying it out records on the question that whether the
// call ran is not known, naming who cancelled.
func TestCancelWhileCarryingOutApproval(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	approvalScript(h)
	entered := make(chan core.RunID, 1)
	pause := h.agent.pause
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Resume != nil {
			return core.Result{}, false // the reply function below carries it out
		}
		return pause(j)
	}
	h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
		entered <- j.Run.ID
		<-ctx.Done()
		return "", ctx.Err()
	}
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	posted, _ := h.qad.snapshot()
	if len(posted) != 1 {
		t.Fatalf("posted = %+v", posted)
	}
	if r, err := h.eng.Answer(context.Background(), core.Answer{Token: posted[0].Question.Token, Choice: core.ChoiceApprove, Actor: "console:you", Name: "You"}); err != nil || r.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", r, err)
	}
	id := <-entered
	if _, err := h.eng.CancelRun(context.Background(), id, core.By{Name: "Olga"}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	qs, err := h.eng.Questions(context.Background(), false)
	if err != nil || len(qs) != 1 {
		t.Fatalf("questions = %+v, %v", qs, err)
	}
	if q := qs[0]; q.Decision() != "Approved by You" || !strings.Contains(q.Outcome, "cancelled by Olga while carrying out the approved call") {
		t.Fatalf("question decision %q outcome %q", q.Decision(), q.Outcome)
	}
}

// TestCancelReleasesHeldHandoff: a hand-off held while the engineer had mail
// queued in the thread is delivered when the run working that mail is
// cancelled, as when it fails.
func TestCancelReleasesHeldHandoff(t *testing.T) {
	h := newHarness(t, core.Limits{})
	started, first, second := make(chan struct{}), make(chan struct{}), make(chan core.RunID, 1)
	calls := 0
	h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
		h.agent.mu.Lock()
		calls++
		n := calls
		h.agent.mu.Unlock()
		if n == 1 {
			close(started)
			<-first
			return "PR opened. @reviewer please review it.", nil
		}
		second <- j.Run.ID
		<-ctx.Done()
		return "", ctx.Err()
	}
	h.start()
	h.say("@engineer open a PR")
	<-started
	h.say("@engineer also fix the typo")
	close(first)
	id := <-second
	if n := len(h.agent.jobsFor("reviewer")); n != 0 {
		t.Fatalf("reviewer ran %d times while the hand-off was held", n)
	}
	if _, err := h.eng.CancelRun(context.Background(), id, core.By{Name: "Olga"}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if n := len(h.agent.jobsFor("reviewer")); n != 1 {
		t.Fatalf("reviewer ran %d times after the cancel, want 1 (the held hand-off)", n)
	}
}
