package e2e

import (
	"io"
	"sync"
	"testing"

	"openbot/core"
)

// TestConsoleStop: /stop at the terminal cancels the engineer's run in the
// current thread for the person who asked for it, with the notice in the
// thread; with approvers configured that do not include the terminal's person,
// it is refused with a plain line and the run goes on.
func TestConsoleStop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		approvers []core.ActorID
		reply     string
		want      core.RunStatus
	}{
		{"asker", nil, "Stopped the work of @engineer", core.RunCancelled},
		{"not an approver", []core.ActorID{"slack:T1:BOSS"}, "only an approver", core.RunRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, entered, release := blockEngineer()
			agent := &scripted{fn: script, calls: map[string][]*core.Job{}}
			x := startConsole(t, core.Options{Agent: agent, Approvers: tc.approvers})
			var once sync.Once
			done := func() { once.Do(func() { close(release) }) }
			defer done()

			x.say("@engineer long job")
			<-entered
			if _, err := io.WriteString(x.in, "/stop\n"); err != nil {
				t.Fatal(err)
			}
			x.out.WaitFor(t, tc.reply)
			if got := runStatuses(t, x.st); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("runs = %v, want [%s]", got, tc.want)
			}
			if tc.want == core.RunCancelled {
				x.out.WaitFor(t, "@engineer's work here was stopped by you.")
			}
			done()
		})
	}
}
