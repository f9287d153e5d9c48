package openbot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// putUsage writes one ledger entry for the run of job, as a model call would.
func putUsage(t *testing.T, st core.Store, job *core.Job, in, out int64) {
	t.Helper()
	err := st.Update(context.Background(), func(tx core.Tx) error {
		_, _, err := tx.PutUsage(core.UsageEntry{Key: core.UsageKey(job.Run.ID, 1), At: time.Now(), Bot: job.Bot.Handle,
			Thread: job.Thread.ID, Run: job.Run.ID, Model: "m", InputTokens: in, OutputTokens: out, CostMicros: 1234})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSlackUsageCommand: /usage in a DM shows this thread and the bot today
// and this month from the ledger, privately.
func TestSlackUsageCommand(t *testing.T) {
	r := startSlack(t, nil)
	r.dm(t, "1767226200.000100", "", "hello")
	putUsage(t, r.st, r.lastRun(t, "chief_of_staff"), 700, 300)
	code, body := r.command(t, slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/usage", TriggerID: "tu1"})
	if code != 200 {
		t.Fatalf("/usage = %d %s", code, body)
	}
	for _, want := range []string{"This thread: 1000 tokens, 0.001234 in 1 calls", "@chief_of_staff today: 1000 tokens", "@chief_of_staff this month: 1000 tokens", "ephemeral"} {
		if !strings.Contains(body, want) {
			t.Errorf("/usage reply lacks %q: %s", want, body)
		}
	}
}
