package e2e

import (
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/console"
	"openbot/core"
	"openbot/store/bolt"
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
			st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			eng, err := core.New(core.Options{Store: st, Agent: agent, Bots: e2eTeam, ShutdownGrace: 2 * time.Second, Approvers: tc.approvers})
			if err != nil {
				t.Fatal(err)
			}
			in, typed := io.Pipe()
			out := &syncBuffer{}
			ad, err := console.New(console.Options{Engine: eng, In: in, Out: out})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.AddAdapter(ad); err != nil {
				t.Fatal(err)
			}
			stop := runEngineAndAdapter(eng, ad)
			t.Cleanup(func() { typed.Close(); stop(); st.Close() })
			var once sync.Once
			done := func() { once.Do(func() { close(release) }) }
			defer done()

			if _, err := io.WriteString(typed, "@engineer long job\n"); err != nil {
				t.Fatal(err)
			}
			<-entered
			if _, err := io.WriteString(typed, "/stop\n"); err != nil {
				t.Fatal(err)
			}
			waitOutput(t, out, tc.reply)
			if got := runStatuses(t, st); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("runs = %v, want [%s]", got, tc.want)
			}
			if tc.want == core.RunCancelled {
				waitOutput(t, out, "@engineer's work here was stopped by you.")
			}
			done()
		})
	}
}

// waitOutput waits until the terminal shows text.
func waitOutput(t *testing.T, out *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(out.String(), text) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q:\n%s", text, out.String())
}
