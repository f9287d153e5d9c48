package core_test

import (
	"context"
	"testing"

	"openbot/core"
)

// TestIngestStartsIdleBotsRun: a message that wakes an idle bot starts its run in
// the ingest's own commit (one commit before the model request, not the ingest's
// and then the worker's pick), and a message to a thread where the bot is busy
// starts nothing there: it waits, queued, for the run in flight.
func TestIngestStartsIdleBotsRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	release := h.heldBot("chief_of_staff", "warm up")
	h.start()
	h.say("warm up") // the engine runs its workers
	h.idle()

	// The worker may be finishing the warm-up (its own pick after a run ends), and
	// then an ingest leaves the pick to it: a few tries, each to an idle bot.
	var (
		res     core.IngestResult
		running []core.Run
	)
	for try := range 3 {
		if try > 0 {
			release <- struct{}{}
			h.idle()
		}
		res = h.say("first")
		if running = h.runs(core.RunRunning); len(running) == 1 {
			break
		}
	}
	if len(running) != 1 || len(running[0].Triggers) != 1 || running[0].Triggers[0] != res.Message {
		t.Fatalf("running after the ingest returned = %+v, want one run of message %d", running, res.Message)
	}

	second := h.say("second")
	running = h.runs(core.RunRunning)
	if len(running) != 1 || running[0].Triggers[0] != res.Message {
		t.Fatalf("running after a message to the busy thread = %+v, want only the first run", running)
	}
	close(release)
	h.idle()
	done := h.runs(core.RunCompleted)
	if last := done[len(done)-1]; len(last.Triggers) != 1 || last.Triggers[0] != second.Message {
		t.Fatalf("completed runs = %+v, want the second message's run last, on its own", done)
	}
}

// heldBot makes handle answer warm at once and hold every other run until a
// value is sent on (or close of) the returned channel, or its context ends.
func (h *harness) heldBot(handle, warm string) chan struct{} {
	release := make(chan struct{})
	h.agent.reply[handle] = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[0].Text == warm {
			return "ok", nil
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done", nil
	}
	return release
}
