package e2e

// End-to-end tests of resuming interrupted runs (DESIGN.md §8), on the rig of
// resume_rig_test.go: a kill at every step boundary, approved calls, and a
// graceful shutdown the next start resumes.

import (
	"context"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
)

var resumeTeam = []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"step_a", "step_b", "deploy"}, ApprovalTools: []string{"deploy"}}}

// twoTools is the scripted run: step_a, then step_b, then the final answer.
func twoTools(step int) openaitest.Reply {
	switch step {
	case 0:
		return openaitest.Calls(openaitest.Call("step_a", `{}`))
	case 1:
		return openaitest.Calls(openaitest.Call("step_b", `{}`))
	}
	return openaitest.Text(resumeFinal)
}

// TestResumeAfterKillAtEveryStep kills the engine at every step boundary of a
// run with two tool calls (step_a is not safe to repeat, step_b is) and starts a
// new one on the same file: the run completes, every model call and tool call
// that had finished ran once, the reply is posted once, and a call of step_a
// killed mid-call is reported to the model as interrupted, not run again. The
// last model call's answer is stored with the run's settle, not in a step
// checkpoint of its own (core.Result.Step): killed before the settle
// committed, that call was not a finished step yet and the model is asked
// again, once (docs/ARCHITECTURE.md, "Resuming interrupted runs").
func TestResumeAfterKillAtEveryStep(t *testing.T) {
	type boundary struct {
		name   string
		hook   string                               // kill when this step starts
		at     func(v stepView) (kill, before bool) // or at this checkpoint
		settle bool                                 // or before the run's settle commits
	}
	started := func(tool string) func(stepView) (bool, bool) {
		return func(v stepView) (bool, bool) { s, d := v.call(tool); return s && !d, true }
	}
	done := func(tool string) func(stepView) (bool, bool) {
		return func(v stepView) (bool, bool) { _, d := v.call(tool); return d, false }
	}
	boundaries := []boundary{
		{name: "before model call 1", hook: "model:0"},
		{name: "after model call 1", at: started("step_a")},
		{name: "during step_a", hook: "tool:step_a"},
		{name: "after step_a", at: done("step_a")},
		{name: "before model call 2", hook: "model:1"},
		{name: "after model call 2", at: started("step_b")},
		{name: "during step_b", hook: "tool:step_b"},
		{name: "after step_b", at: done("step_b")},
		{name: "before model call 3", hook: "model:2"},
		{name: "after model call 3", settle: true},
	}
	for _, b := range boundaries {
		t.Run(b.name, func(t *testing.T) {
			x := newResumeRig(t, resumeTeam, twoTools)
			if b.hook != "" {
				x.hooks[b.hook] = func(context.Context) {
					x.mu.Lock()
					delete(x.hooks, b.hook) // once: the next engine goes on
					x.mu.Unlock()
					x.cur.st.kill()
				}
			}
			x.start(b.at)
			x.cur.st.atSettle.Store(b.settle)
			x.say("please do both steps")
			x.waitKilled()
			x.start(nil)
			x.idle()

			x.wantOneReply()
			x.mu.Lock()
			defer x.mu.Unlock()
			for step := 0; step < 3; step++ {
				want := 1
				if b.settle && step == 2 {
					want = 2 // its answer was lost with the settle: asked again
				}
				if x.modelRan[step] != want {
					t.Errorf("model call %d finished %d times, want %d", step+1, x.modelRan[step], want)
				}
			}
			wantA := 1
			if b.name == "during step_a" {
				wantA = 0                 // interrupted, not safe to repeat: the model is told
				second := x.toolResults() // of the last request
				if len(second) == 0 || !strings.Contains(second[0], "interrupted by a restart") {
					t.Errorf("tool results the model got = %q, want step_a reported interrupted", second)
				}
			}
			if x.toolRan["step_a"] != wantA || x.toolIn["step_a"] != 1 {
				t.Errorf("step_a reached %d times, finished %d times; want 1 and %d", x.toolIn["step_a"], x.toolRan["step_a"], wantA)
			}
			if x.toolRan["step_b"] != 1 {
				t.Errorf("step_b finished %d times, want 1", x.toolRan["step_b"])
			}
		})
	}
}

// approveDeploy waits for the question of the deploy call and approves it.
func (x *resumeRig) approveDeploy() core.QuestionID {
	x.t.Helper()
	var q core.Question
	x.cur.waitStore("the deploy question", func(tx core.ReadTx) bool {
		qs, _ := tx.Questions(true, 0)
		if len(qs) == 1 && len(qs[0].Askers) > 0 {
			q = qs[0]
			return true
		}
		return false
	})
	res, err := x.cur.eng.Answer(context.Background(), core.Answer{Question: q.ID, Choice: core.ChoiceApprove, Actor: q.Askers[0], Name: "You"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		x.t.Fatalf("approve: %+v, %v", res, err)
	}
	return q.ID
}

// outcome is the stored outcome of question id.
func (x *resumeRig) outcome(id core.QuestionID) string {
	x.t.Helper()
	q := storetest.Read(x.t, x.cur.st, func(tx core.ReadTx) (core.Question, error) { return tx.Question(id) })
	return q.Outcome
}

// TestResumeApprovedCall: an approved call of deploy (not safe to repeat) that
// a kill interrupted mid-call is reported to the model as interrupted and not
// run again; an approval recorded just before a kill (the resumed run had not
// started the call, or the resume was not even picked) runs its call exactly
// once after the restart.
func TestResumeApprovedCall(t *testing.T) {
	script := func(step int) openaitest.Reply {
		if step == 0 {
			return openaitest.Calls(openaitest.Call("deploy", `{"target":"prod"}`))
		}
		return openaitest.Text(resumeFinal)
	}
	cases := []struct {
		name    string
		midCall bool
	}{{"mid-call", true}, {"answered, call not started", false}, {"answered, resume not picked", false}}
	for _, c := range cases {
		midCall := c.midCall
		x := newResumeRig(t, resumeTeam, script)
		var at func(stepView) (bool, bool)
		switch c.name {
		case "mid-call":
			x.hooks["tool:deploy"] = func(context.Context) { x.cur.st.kill() }
		case "answered, call not started":
			// Kill as the resumed run is about to start the approved call.
			at = func(v stepView) (bool, bool) { s, d := v.call("deploy"); return s && !d, true }
		default:
			// Kill as the worker picks the answered question's resume: the
			// second running write with the call pending (the first is the
			// model's answer); the run stays waiting with the answer stored.
			seen := 0
			at = func(v stepView) (bool, bool) {
				if s, d := v.call("deploy"); v.Pending != nil && !s && !d {
					seen++
				}
				return seen == 2, true
			}
		}
		x.start(at)
		x.say("deploy to prod")
		q := x.approveDeploy()
		x.waitKilled()
		x.mu.Lock()
		delete(x.hooks, "tool:deploy")
		x.mu.Unlock()
		x.start(nil)
		x.idle()

		if n := x.count("[engineer] " + resumeFinal); n != 1 {
			t.Errorf("%s: reply printed %d times, want 1; printed:\n%s", c.name, n, x.out.String())
		}
		results := x.toolResults()
		x.mu.Lock()
		in, ran := x.toolIn["deploy"], x.toolRan["deploy"]
		x.mu.Unlock()
		if midCall {
			if in != 1 || ran != 0 {
				t.Errorf("interrupted approved call reached %d times, finished %d times; want 1 and 0", in, ran)
			}
			if len(results) != 1 || !strings.Contains(results[0], "interrupted by a restart") {
				t.Errorf("tool results the model got = %q, want the call reported interrupted", results)
			}
			if got := x.outcome(q); got != core.OutcomeInterrupted {
				t.Errorf("outcome = %q, want %q", got, core.OutcomeInterrupted)
			}
		} else {
			if in != 1 || ran != 1 {
				t.Errorf("%s: approved call reached %d times, finished %d times; want exactly once", c.name, in, ran)
			}
			if len(results) != 1 || !strings.Contains(results[0], "deploy ok") {
				t.Errorf("tool results the model got = %q, want the call's result", results)
			}
			if got := x.outcome(q); got != core.OutcomeRan {
				t.Errorf("outcome = %q, want %q", got, core.OutcomeRan)
			}
		}
	}
}

// TestResumeAfterGracefulShutdown: a shutdown whose grace ends while a tool call
// runs stops the run without failing it; the next start resumes it, tells the
// model the call (not safe to repeat) was interrupted, and finishes the run.
func TestResumeAfterGracefulShutdown(t *testing.T) {
	x := newResumeRig(t, resumeTeam, twoTools)
	x.grace = 50 * time.Millisecond
	entered := make(chan struct{})
	x.hooks["tool:step_a"] = func(ctx context.Context) {
		x.mu.Lock()
		delete(x.hooks, "tool:step_a")
		x.mu.Unlock()
		close(entered)
		<-ctx.Done() // runs until the shutdown's grace ends
	}
	x.start(nil)
	x.say("please do both steps")
	select {
	case <-entered:
	case <-time.After(15 * time.Second):
		t.Fatal("step_a never started")
	}
	x.stop(x.cur)
	x.grace = 0 // settling is bounded by the grace too
	x.start(nil)
	x.idle()
	x.wantOneReply()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.toolIn["step_a"] != 1 || x.toolRan["step_a"] != 0 || x.toolRan["step_b"] != 1 {
		t.Errorf("step_a reached %d, finished %d; step_b finished %d", x.toolIn["step_a"], x.toolRan["step_a"], x.toolRan["step_b"])
	}
	if x.modelRan[0] != 1 || x.modelRan[1] != 1 || x.modelRan[2] != 1 {
		t.Errorf("model calls by step = %v, want each once", x.modelRan)
	}
}
