package e2e

// End-to-end tests of runs killed between the pick and their first step
// checkpoint (DESIGN.md §8): nothing happened yet, so the next start runs them
// again from the beginning, a bounded number of times.

import (
	"testing"

	"openbot/core"
)

// beforeFirstStep kills at the first checkpoint the run stores, before it
// commits: the first model call's step (core holds the run's first checkpoint,
// core.CheckpointHolder, and the console does not stream, so the step's is the
// first stored). The run is running with no checkpoint, as after a kill
// anywhere between its pick and its first step.
func beforeFirstStep(v stepView) (kill, before bool) {
	answers := 0
	for _, m := range v.Transcript {
		if m.Role == "assistant" {
			answers++
		}
	}
	if answers > 1 {
		return false, false
	}
	if v.Pending != nil {
		for _, c := range v.Pending.Calls {
			if c.Started {
				return false, false
			}
		}
	}
	return true, true
}

// TestResumeKillBeforeFirstCheckpoint: the message is answered by the real
// reply, once, with no notice, and every tool call and every model call after the
// first ran once.
func TestResumeKillBeforeFirstCheckpoint(t *testing.T) {
	x := newResumeRig(t, resumeTeam, twoTools)
	x.start(beforeFirstStep)
	x.say("please do both steps")
	x.waitKilled()
	x.start(nil)
	x.idle()

	x.wantOneReply()
	x.mu.Lock()
	defer x.mu.Unlock()
	// The killed process saw the first call answered before storing its step:
	// it runs once more, and nothing of the first answer was kept.
	if n := x.modelRan[0]; n != 2 {
		t.Errorf("model call 1 finished %d times, want twice: in the killed process and after it", n)
	}
	for step := 1; step < 3; step++ {
		if x.modelRan[step] != 1 {
			t.Errorf("model call %d finished %d times, want 1", step+1, x.modelRan[step])
		}
	}
	if x.toolRan["step_a"] != 1 || x.toolRan["step_b"] != 1 {
		t.Errorf("tools finished %v, want step_a and step_b once", x.toolRan)
	}
}

// TestResumeKilledThriceBeforeFirstCheckpoint: a run whose process dies before
// its first step three times in a row is not started a fourth time; it ends
// with the "interrupted" notice, once, and nothing of the run went on: no tool
// ran and no model call after the first. Each killed process saw the first
// call answered, and kept nothing of it.
func TestResumeKilledThriceBeforeFirstCheckpoint(t *testing.T) {
	x := newResumeRig(t, resumeTeam, twoTools)
	x.start(beforeFirstStep)
	x.say("please do both steps")
	x.waitKilled()
	for range core.MaxRestartsBeforeFirstStep {
		x.start(beforeFirstStep) // recovery starts it again; it dies again
		x.waitKilled()
	}
	x.start(nil)
	x.idle()

	if n := x.count("interrupted because openbot restarted"); n != 1 {
		t.Errorf("interrupted notices printed %d times, want 1; printed:\n%s", n, x.out.String())
	}
	if n := x.count("[engineer] " + resumeFinal); n != 0 {
		t.Errorf("reply printed %d times, want 0; printed:\n%s", n, x.out.String())
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for step, n := range x.modelRan {
		if step > 0 || n > 1+core.MaxRestartsBeforeFirstStep {
			t.Errorf("model calls finished %v, want at most the first, once per killed process", x.modelRan)
		}
	}
	if len(x.toolRan) != 0 {
		t.Errorf("tools finished %v, want none", x.toolRan)
	}
}
