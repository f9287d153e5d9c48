package mcp

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/agentstest"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
)

// TestStdioServerToolsThroughAgentLoop is DESIGN.md §6's MCP tools end to end: a
// small stdio MCP server built in the test gives its tools to a bot as
// <server>__<tool> and a call round-trips through the agent loop. The Manager
// publishes the server's tools into an agents.Registry (OnTools -> SetSource);
// the model (openaitest) is offered "alpha__echo" with the server's own JSON
// schema, calls it, and gets the server's answer, wrapped untrusted, in its
// next request. A bot whose tools do not name the server never sees the tool
// and cannot call it.
func TestStdioServerToolsThroughAgentLoop(t *testing.T) {
	reg := agents.NewRegistry()
	var (
		mu        sync.Mutex
		setErrs   []error
		published = make(chan struct{}, 1)
	)
	m := NewManager(Options{
		Servers: []ServerConfig{stdioServer(t, "alpha", "ok", nil)},
		OnTools: func(server string, tools []agents.Tool) {
			if err := reg.SetSource(server, tools); err != nil {
				mu.Lock()
				setErrs = append(setErrs, err)
				mu.Unlock()
			}
			select {
			case published <- struct{}{}:
			default:
			}
		},
		CallTimeout: 10 * time.Second,
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range setErrs {
			t.Errorf("Registry.SetSource: %v", err)
		}
	})
	runtest.Start(t, m.Run) // stopped before the check above: cleanups run last first
	deadline := time.After(20 * time.Second)
	for {
		if _, ok := reg.Get("alpha__echo"); ok {
			break
		}
		select {
		case <-published:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("alpha's tools never reached the registry; status %+v", m.Status())
		}
	}

	model := openaitest.New(t)
	a, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: model.URL(), APIKey: "sk-test", Model: "fake-model"}},
		Registry:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}

	// A bot that selects the server by name gets its tools and uses one.
	model.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "alpha__echo", Arguments: `{"text":"hello over stdio"}`}),
		openaitest.Text("The server said hello."),
	)
	engineer := core.BotProfile{Handle: "engineer", Name: "Engineer", Tools: []string{"alpha"}}
	env := &threadEnv{}
	res, err := execute(t, a, env, engineer)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "The server said hello." {
		t.Errorf("reply = %q", res.Reply)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	offered := reqs[0].ToolNames()
	for _, want := range []string{"alpha__echo", "alpha__dotted_name", "alpha__fail"} {
		if !slices.Contains(offered, want) {
			t.Errorf("first request offers %v, want %s among them", offered, want)
		}
	}
	var def map[string]any
	for _, tl := range reqs[0].Body.Tools {
		if tl.Function != nil && tl.Function.Name == "alpha__echo" {
			if !strings.Contains(tl.Function.Description, "Echo the text back") || !strings.Contains(tl.Function.Description, "MCP server alpha") {
				t.Errorf("alpha__echo description = %q", tl.Function.Description)
			}
			raw, _ := json.Marshal(tl.Function.Parameters)
			_ = json.Unmarshal(raw, &def)
		}
	}
	if want := serverSchema(t, "echo"); !reflect.DeepEqual(def, want) {
		t.Errorf("alpha__echo parameters offered to the model:\n%v\nwant the server's inputSchema:\n%v", def, want)
	}
	second := reqs[1].Body.Messages
	last := second[len(second)-1]
	if last.Role != "tool" || last.ToolCallID != "c1" ||
		last.Content != `<untrusted source="tool:alpha__echo">echo: hello over stdio</untrusted>` {
		t.Errorf("tool result message in the second request = %+v", last)
	}
	if ev := env.event("tool_result"); ev == nil || ev["name"] != "alpha__echo" || ev["error"] != false {
		t.Errorf("tool_result event = %v", ev)
	}

	// A bot whose tools omit the server is not offered its tools, and a call the
	// model makes up anyway does not reach the server.
	model.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "c2", Name: "alpha__echo", Arguments: `{"text":"sneaky"}`}),
		openaitest.Text("No such tool."),
	)
	reviewer := core.BotProfile{Handle: "reviewer", Name: "Reviewer"}
	env2 := &threadEnv{}
	if _, err := execute(t, a, env2, reviewer); err != nil {
		t.Fatal(err)
	}
	reqs = model.Requests()[2:]
	if len(reqs) != 2 {
		t.Fatalf("reviewer's model requests = %d, want 2", len(reqs))
	}
	for _, n := range reqs[0].ToolNames() {
		if strings.HasPrefix(n, "alpha__") {
			t.Errorf("reviewer is offered %s (tools %v)", n, reqs[0].ToolNames())
		}
	}
	if strings.Contains(string(reqs[0].Raw), "alpha__") {
		t.Errorf("reviewer's request mentions an alpha tool:\n%s", reqs[0].Raw)
	}
	msgs := reqs[1].Body.Messages
	last = msgs[len(msgs)-1]
	if last.Role != "tool" || !strings.Contains(last.Content, `there is no tool named "alpha__echo"`) || strings.Contains(last.Content, "echo: sneaky") {
		t.Errorf("reviewer's made-up call = %+v", last)
	}
}

// serverSchema is the inputSchema the test server itself declares for tool, as
// it goes on the wire.
func serverSchema(t *testing.T, tool string) map[string]any {
	t.Helper()
	st := newTestServer(true).GetTool(tool)
	if st == nil {
		t.Fatalf("test server has no tool %q", tool)
	}
	raw, err := json.Marshal(st.Tool)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		InputSchema map[string]any `json:"inputSchema"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil || wire.InputSchema == nil {
		t.Fatalf("inputSchema of %s: %v in %s", tool, err, raw)
	}
	return wire.InputSchema
}

// execute runs bot once on a thread holding one message from a person that
// mentions it.
func execute(t *testing.T, a *agents.Agent, env *threadEnv, bot core.BotProfile) (core.Result, error) {
	t.Helper()
	alice := core.ActorID("slack:T1:U1")
	trig := env.add(alice, "Alice", "@"+bot.Handle+" please echo something", bot.Handle)
	job := &core.Job{
		Run:        core.Run{ID: 1, Bot: bot.ID(), Thread: 1},
		Bot:        bot,
		Thread:     core.Thread{ID: 1, Bindings: []core.Binding{{Platform: "slack"}}},
		Triggers:   []core.Message{trig},
		Roster:     []core.BotProfile{bot},
		DefaultBot: bot.Handle,
		Participants: []core.Actor{
			{ID: alice, Kind: core.ActorHuman, Name: "Alice"},
			{ID: bot.ID(), Kind: core.ActorBot, Handle: bot.Handle},
		},
		Env: env,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Execute(ctx, job)
}

// threadEnv is the shared in-memory core.RunEnv (agentstest.Env) that also
// records system notices (core.Noticer) and approved calls' outcomes
// (core.OutcomeRecorder).
type threadEnv struct {
	agentstest.Env
	notices  []string
	outcomes map[core.QuestionID]string
}

var _ core.RunEnv = (*threadEnv)(nil)

// Notice records a system notice (core.Noticer).
func (e *threadEnv) Notice(_ context.Context, text string) error {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.notices = append(e.notices, text)
	return nil
}

// RecordOutcome records an approved call's outcome (core.OutcomeRecorder).
func (e *threadEnv) RecordOutcome(_ context.Context, q core.QuestionID, outcome string) error {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	if e.outcomes == nil {
		e.outcomes = map[core.QuestionID]string{}
	}
	e.outcomes[q] = outcome
	return nil
}

func (e *threadEnv) add(sender core.ActorID, name, text string, mentions ...string) core.Message {
	return e.Add(sender, name, text, mentions...)
}

func (e *threadEnv) event(typ string) map[string]any { return e.Event(typ) }
