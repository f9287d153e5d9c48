package agents

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

// TestAbandonedRunLogsNoWarning: a run whose context core ended (its claim
// lapsed: its writes are refused and its context cancelled) ends with no
// warning in the log: its refused checkpoint is not an operator's concern,
// core reports the stop itself.
func TestAbandonedRunLogsNoWarning(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("never seen") })
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	env := &saveEnv{streamEnv: &streamEnv{fakeEnv: &fakeEnv{}}}
	env.save = func(context.Context, json.RawMessage) error {
		cancel(errors.New("the run's claim lapsed"))
		return errors.New("the run's claim lapsed")
	}
	trig := env.add(alice, "Alice", "@engineer hi", "engineer")
	job := newJob(env.fakeEnv, engineer, false, trig)
	job.Env = env
	logs := &syncBuffer{}
	a := newAgent(t, srv, NewRegistry(), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	if _, err := a.Execute(tctx, job); err == nil {
		t.Fatal("Execute of the abandoned run returned no error")
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("abandoned run logged %s", line)
		}
	}
}
