package agents

import (
	"context"
	"testing"
	"time"

	"openbot/agents/agentstest"
	"openbot/agents/openaitest"
	"openbot/core"
)

// fakeEnv is the shared in-memory core.RunEnv for one thread
// (agentstest.Env), with the short names this package's tests use.
type fakeEnv struct{ agentstest.Env }

var _ core.RunEnv = (*fakeEnv)(nil)

func (e *fakeEnv) add(sender core.ActorID, name, text string, mentions ...string) core.Message {
	return e.Add(sender, name, text, mentions...)
}

func (e *fakeEnv) eventTypes() []string { return e.EventTypes() }

// Test fixtures: a human, a coordinating chief and an engineer delegate.
var (
	alice    = core.ActorID("slack:T1:U1")
	chief    = core.BotProfile{Handle: "chief", Name: "Chief", Description: "Coordinates the team.", Instructions: "Split work and delegate."}
	engineer = core.BotProfile{Handle: "engineer", Name: "Engineer", Description: "Writes code.", Instructions: "Write careful Go."}
	reviewer = core.BotProfile{Handle: "reviewer", Name: "Reviewer", Description: "Reviews PRs."}
)

const testKey = "sk-secret-test-key-123"

func newAgent(t *testing.T, srv *openaitest.Server, reg *Registry, mutate func(*Options)) *Agent {
	t.Helper()
	return newAgentOn(t, Provider{BaseURL: srv.URL(), APIKey: testKey, Model: "fake-model"}, reg, mutate)
}

// newAgentOn is an agent whose default profile is p, sending the header
// X-Team: openbot, with reg's tools, changed by mutate (nil: no change).
func newAgentOn(t *testing.T, p Provider, reg *Registry, mutate func(*Options)) *Agent {
	t.Helper()
	p.Headers = map[string]string{"X-Team": "openbot"}
	opts := Options{Providers: map[string]Provider{"default": p}, Registry: reg}
	if mutate != nil {
		mutate(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newJob builds a job for bot in env; triggers are messages already in env.
func newJob(env *fakeEnv, bot core.BotProfile, scoped bool, triggers ...core.Message) *core.Job {
	return &core.Job{
		Run:        core.Run{ID: 7, Bot: bot.ID(), Thread: 1},
		Bot:        bot,
		Thread:     core.Thread{ID: 1, Bindings: []core.Binding{{Platform: "slack"}}},
		Triggers:   triggers,
		Roster:     []core.BotProfile{chief, engineer, reviewer},
		DefaultBot: "chief",
		Scoped:     scoped,
		Participants: []core.Actor{
			{ID: alice, Kind: core.ActorHuman, Name: "Alice"},
			{ID: chief.ID(), Kind: core.ActorBot, Handle: "chief"},
			{ID: engineer.ID(), Kind: core.ActorBot, Handle: "engineer"},
		},
		Env: env,
	}
}

// executeReply runs one job of Alice's "hi" against a new fake model that
// answers reply first, and returns the fake with the run's outcome.
func executeReply(t *testing.T, reply openaitest.Reply) (*openaitest.Server, core.Result, error) {
	t.Helper()
	srv := openaitest.New(t)
	srv.Enqueue(reply)
	_, res, err := hiFromAlice(t, newAgent(t, srv, nil, nil))
	return srv, res, err
}

// hiFromAlice runs a as chief on one message, "hi" from Alice, and returns
// the job's environment (what the run stored) with its result.
func hiFromAlice(t *testing.T, a *Agent) (*fakeEnv, core.Result, error) {
	t.Helper()
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "hi")
	res, err := execute(t, a, newJob(env, chief, false, trig))
	return env, res, err
}

func execute(t *testing.T, a *Agent, job *core.Job) (core.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Execute(ctx, job)
}

// sumEnv is a fakeEnv that stores summaries (core.Summarizer) as bot's
// messages of kind summary, once per covers as core does.
type sumEnv struct {
	*fakeEnv
	bot core.ActorID
}

var _ core.Summarizer = sumEnv{}

func (e sumEnv) PutSummary(_ context.Context, text string, covers core.MessageID) (core.Message, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	for _, m := range e.Msgs {
		if m.Kind == core.KindSummary && m.Sender == e.bot && m.Covers == covers {
			return m, nil
		}
	}
	m := core.Message{ID: core.MessageID(len(e.Msgs) + 1), Thread: 1, Sender: e.bot, Text: text, Kind: core.KindSummary, Covers: covers}
	e.Msgs = append(e.Msgs, m)
	return m, nil
}

// summaries returns the summary messages of the thread.
func (e *fakeEnv) summaries() []core.Message {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	var out []core.Message
	for _, m := range e.Msgs {
		if m.Kind == core.KindSummary {
			out = append(out, m)
		}
	}
	return out
}
