package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"openbot/core"
	"openbot/store/bolt"
)

// questionsOf reads every stored question.
func questionsOf(h *harness) []core.Question {
	h.t.Helper()
	qs, err := h.eng.Questions(context.Background(), false)
	if err != nil {
		h.t.Fatal(err)
	}
	return qs
}

// approveFirst answers the only posted question with Approve.
func approveFirst(h *harness) core.Question {
	h.t.Helper()
	posted, _ := h.qad.snapshot()
	if len(posted) != 1 {
		h.t.Fatalf("posted questions = %d, want 1", len(posted))
	}
	r, err := h.eng.Answer(context.Background(), core.Answer{Token: posted[0].Question.Token, Choice: core.ChoiceApprove, Actor: "console:you", Name: "You"})
	if err != nil || r.Outcome != core.AnswerAccepted {
		h.t.Fatalf("Answer = %+v, %v", r, err)
	}
	return r.Question
}

// An approved call that cannot run is never silently dropped: the agent posts
// a system notice through the RunEnv and records the outcome on the question,
// which the approval audit (Engine.Questions) shows.
func TestApprovedCallNotRunIsNoticedAndRecorded(t *testing.T) {
	h := newQuestionHarness(t, "console:you")
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Bot.Handle != "engineer" {
			return core.Result{}, false
		}
		if j.Resume == nil {
			return core.Result{Pause: &core.Pause{Kind: core.QuestionApproval, Text: "@engineer wants to run alpha__count", Tool: "alpha__count",
				Args: json.RawMessage(`{}`), CallID: "call_1"}, Checkpoint: json.RawMessage(`{"v":1}`)}, true
		}
		n, ok1 := j.Env.(core.Noticer)
		rec, ok2 := j.Env.(core.OutcomeRecorder)
		if !ok1 || !ok2 {
			return core.Result{Reply: "the RunEnv has no notices or outcomes"}, true
		}
		ctx := context.Background()
		if err := rec.RecordOutcome(ctx, j.Resume.ID, "not run: MCP server alpha is not available: it exited with status 2"); err != nil {
			return core.Result{Reply: "record: " + err.Error()}, true
		}
		if err := rec.RecordOutcome(ctx, j.Resume.ID+100, "ran"); err == nil {
			return core.Result{Reply: "another question's outcome was accepted"}, true
		}
		if err := n.Notice(ctx, "The approved call of alpha__count did not run: MCP server alpha is not available."); err != nil {
			return core.Result{Reply: "notice: " + err.Error()}, true
		}
		return core.Result{Reply: "I could not count."}, true
	}
	h.start()
	res := h.say("@engineer count please")
	h.idle()
	approveFirst(h)
	h.idle()
	ms := h.messages(res.Thread)
	var notice, reply bool
	for _, m := range ms {
		if m.Kind == core.KindNotice && m.Sender == core.SystemActor && strings.Contains(m.Text, "did not run: MCP server alpha") {
			notice = true
		}
		reply = reply || m.Text == "I could not count."
	}
	if !notice || !reply {
		t.Fatalf("thread has notice=%v reply=%v; messages: %+v", notice, reply, ms)
	}
	qs := questionsOf(h)
	if len(qs) != 1 || qs[0].Outcome != "not run: MCP server alpha is not available: it exited with status 2" {
		t.Fatalf("questions = %+v, want the outcome recorded", qs)
	}
}

// A resumed run that fails before its approved call ran leaves "not run" and
// the cause on the question; a call that ran keeps "ran".
func TestApprovedCallOfFailedRunIsRecordedNotRun(t *testing.T) {
	for _, ranFirst := range []bool{false, true} {
		h := newQuestionHarness(t, "console:you")
		h.agent.pause = func(j *core.Job) (core.Result, bool) {
			if j.Resume == nil {
				return core.Result{Pause: &core.Pause{Kind: core.QuestionApproval, Text: "run it", Tool: "shell",
					Args: json.RawMessage(`{}`), CallID: "call_1"}, Checkpoint: json.RawMessage(`{"v":1}`)}, true
			}
			return core.Result{}, false
		}
		h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
			if ranFirst {
				if err := j.Env.(core.OutcomeRecorder).RecordOutcome(ctx, j.Resume.ID, core.OutcomeRan); err != nil {
					return "", err
				}
			}
			return "", errors.New("the model is down")
		}
		h.start()
		h.say("@engineer run it")
		h.idle()
		approveFirst(h)
		h.idle()
		qs := questionsOf(h)
		want := "not run: the run failed before the call ran: the model is down"
		if ranFirst {
			want = core.OutcomeRan
		}
		if len(qs) != 1 || qs[0].Outcome != want {
			t.Fatalf("ranFirst=%v: outcome = %q, want %q", ranFirst, qs[0].Outcome, want)
		}
		h.stop()
	}
}

// A run that was carrying out an approved call when openbot died resumes at the
// next start (Job.Restart with its answered question); when the agent cannot
// resume it, the run fails and its question's outcome says it is not known
// whether the call ran.
func TestApprovedCallInterruptedByCrashIsRecordedUnknown(t *testing.T) {
	for _, resumable := range []bool{true, false} {
		outcome := crashAfterApproval(t, resumable)
		want := core.OutcomeInterrupted
		if resumable {
			want = ""
		}
		if outcome != want {
			t.Errorf("resumable=%v: outcome = %q, want %q", resumable, outcome, want)
		}
	}
}

func crashAfterApproval(t *testing.T, resumable bool) string {
	h := newQuestionHarness(t, "console:you")
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	h.stop()
	// What a crash right after the resume was picked leaves behind.
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(context.Background(), func(tx core.Tx) error {
		qs, err := tx.Questions(true, 0)
		if err != nil || len(qs) != 1 {
			return fmt.Errorf("pending questions %v, %v", qs, err)
		}
		q := qs[0]
		q.Status, q.Choice, q.AnsweredBy, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "console:you", "You"
		if _, err := tx.PutQuestion(q); err != nil {
			return err
		}
		r, err := tx.Run(q.Run)
		if err != nil {
			return err
		}
		r.Status = core.RunRunning
		_, err = tx.PutRun(r)
		return err
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var restarts int
	script := h.agent.pause
	h.agent.mu.Lock()
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if !j.Restart {
			return script(j)
		}
		restarts++
		if !resumable || j.Resume == nil || !j.Resume.Approved() {
			return core.Result{}, false // the engineer's reply func fails it below
		}
		return script(j)
	}
	h.agent.reply["engineer"] = func(context.Context, *core.Job) (string, error) {
		return "", errors.New("cannot resume")
	}
	h.agent.mu.Unlock()
	h.start()
	h.idle()
	if restarts != 1 || (*ran == 1) != resumable {
		t.Fatalf("resumable=%v: restarted jobs %d, approved call ran %d times", resumable, restarts, *ran)
	}
	qs := questionsOf(h)
	if len(qs) != 1 {
		t.Fatalf("questions after the restart = %+v", qs)
	}
	return qs[0].Outcome
}
