package core_test

import (
	"context"
	"fmt"
	"testing"

	"openbot/core"
)

// A bot's summary of its thread (Summarizer) is stored as a message of kind
// summary sent by the bot, once per covered range however often a restarted
// run stores it again; it is never delivered to a platform and wakes nobody.
func TestSummaryStoredOnceNeverPosted(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		s, ok := job.Env.(core.Summarizer)
		if !ok {
			return "", fmt.Errorf("the RunEnv stores no summaries")
		}
		first, err := s.PutSummary(ctx, "Summary: the code word is PELICAN-9.", job.Triggers[0].ID)
		if err != nil {
			return "", err
		}
		again, err := s.PutSummary(ctx, "a second try after a crash", job.Triggers[0].ID)
		if err != nil || again.ID != first.ID || again.Text != first.Text {
			return "", fmt.Errorf("stored again: %+v, %v; want the first %+v", again, err, first)
		}
		return "done", nil
	}
	h.start()
	res := h.say("the code word is PELICAN-9")
	h.idle()
	var sums []core.Message
	for _, m := range h.messages(res.Thread) {
		if m.Kind == core.KindSummary {
			sums = append(sums, m)
		}
	}
	if len(sums) != 1 || sums[0].Sender != "bot:chief_of_staff" || sums[0].Covers != res.Message {
		t.Fatalf("summaries = %+v, want one by the bot covering message %d", sums, res.Message)
	}
	for _, text := range h.ad.texts() {
		if text != "[chief_of_staff] done" {
			t.Errorf("delivered %q; want only the reply", text)
		}
	}
	if runs := h.runs(core.RunCompleted); len(runs) != 1 {
		t.Errorf("completed runs = %d, want 1 (the summary woke nobody)", len(runs))
	}
}
