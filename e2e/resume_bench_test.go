package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// BenchmarkResumeAfterKill100 measures how long a new engine takes, after a
// kill with 100 runs in flight (each in a tool call of step_b, repeat-safe), to
// resume and finish all of them against the fake model: recovery, 100 resumes
// from their step checkpoints, one tool call and one model call each, 100
// replies. The figure is reported as ms/resume.
func BenchmarkResumeAfterKill100(b *testing.B) {
	const runs = 100
	team := make([]core.BotProfile, runs)
	for i := range team {
		team[i] = core.BotProfile{Handle: fmt.Sprintf("b%03d", i), Name: fmt.Sprintf("Bot %d", i), Tools: []string{"step_a", "step_b"}}
	}
	var total time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		x := newResumeRig(b, team, twoTools)
		x.limits = core.Limits{MaxConcurrentRuns: runs}
		var inB atomic.Int32
		x.hooks["tool:step_b"] = func(ctx context.Context) {
			if inB.Add(1) == runs {
				x.cur.st.kill()
			}
			select {
			case <-x.cur.st.killed:
			case <-ctx.Done():
			}
		}
		x.start(nil)
		for i, bot := range team {
			in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("bench:%d", i),
				ThreadKey: fmt.Sprintf("console:t%d", i), Conversation: "main", PlatformID: fmt.Sprintf("in%d", i),
				SenderID: "console:you", SenderName: "you", Text: "@" + bot.Handle + " go", StartThread: true}
			if _, err := x.cur.eng.Ingest(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
		x.waitKilled()
		x.mu.Lock()
		delete(x.hooks, "tool:step_b")
		x.mu.Unlock()
		b.StartTimer()
		start := time.Now()
		x.start(nil)
		x.idle()
		total += time.Since(start)
		b.StopTimer()
		if got := x.count("[b"); got != runs {
			b.Fatalf("replies printed = %d, want %d", got, runs)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/resume")
}
