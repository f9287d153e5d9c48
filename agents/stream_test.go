package agents

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// streamEnv is a fakeEnv that records what the run streams (core.TextStreamer).
type streamEnv struct {
	*fakeEnv
	smu   sync.Mutex
	shown []string
}

var _ core.TextStreamer = (*streamEnv)(nil)

func (e *streamEnv) StreamText(text string) {
	e.smu.Lock()
	defer e.smu.Unlock()
	e.shown = append(e.shown, text)
}

func (e *streamEnv) StreamWorking(tools ...string) {
	e.StreamText("working: " + strings.Join(tools, ","))
}

func TestLoopStreamsTextAndToolStatus(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}),
		openaitest.Text("The answer is forty-two, as looked up."),
	)
	reg := NewRegistry()
	if err := reg.Add(&FuncTool{ToolName: "lookup", Desc: "look up", Params: json.RawMessage(`{"type":"object","properties":{}}`),
		Fn: func(_ context.Context, _ ToolCall) (string, error) { return "42", nil }}); err != nil {
		t.Fatal(err)
	}
	bot := engineer
	bot.Tools = []string{"lookup"}
	env := &streamEnv{fakeEnv: &fakeEnv{}}
	trig := env.add(alice, "Alice", "@engineer answer?", "engineer")
	job := newJob(env.fakeEnv, bot, false, trig)
	job.Env = env
	res, err := execute(t, newAgent(t, srv, reg, nil), job)
	if err != nil {
		t.Fatal(err)
	}
	env.smu.Lock()
	shown := slices.Clone(env.shown)
	env.smu.Unlock()
	if len(shown) < 3 || shown[0] != "working: lookup" {
		t.Fatalf("streamed = %q, want the tool status first, then the answer growing", shown)
	}
	rest := shown[1:]
	for i := 1; i < len(rest); i++ {
		if !strings.HasPrefix(rest[i], rest[i-1]) {
			t.Fatalf("streamed text does not grow: %q then %q", rest[i-1], rest[i])
		}
	}
	if last := rest[len(rest)-1]; last != res.Reply {
		t.Errorf("last streamed = %q, reply = %q", last, res.Reply)
	}
	// Run events are per step, never per streamed piece.
	env.Mu.Lock()
	defer env.Mu.Unlock()
	if n := len(env.Events); n > 4 {
		t.Errorf("run events = %d, want a few per step: %+v", n, env.Events)
	}
}
