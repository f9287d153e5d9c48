package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
)

// fakeEnv is an in-memory core.RunEnv for one thread.
type fakeEnv struct {
	mu          sync.Mutex
	msgs        []core.Message // ascending IDs
	events      []recordedEvent
	checkpoints []json.RawMessage
	todo        []core.TodoItem
	posted      []string
}

type recordedEvent struct {
	Type    string
	Payload map[string]any
}

var _ core.RunEnv = (*fakeEnv)(nil)

func (e *fakeEnv) add(sender core.ActorID, name, text string, mentions ...string) core.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := core.Message{ID: core.MessageID(len(e.msgs) + 1), Thread: 1, Sender: sender, SenderName: name, Text: text, Mentions: mentions}
	e.msgs = append(e.msgs, m)
	return m
}

func (e *fakeEnv) Messages(ctx context.Context, after core.MessageID, limit int) ([]core.Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.Message
	for _, m := range e.msgs {
		if m.ID > after && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, ctx.Err()
}

func (e *fakeEnv) MessagesBefore(ctx context.Context, before core.MessageID, limit int) ([]core.Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.Message
	for _, m := range slices.Backward(e.msgs) {
		if (before == 0 || m.ID < before) && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, ctx.Err()
}

func (e *fakeEnv) Count(context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.msgs), nil
}

func (e *fakeEnv) RecordEvent(_ context.Context, typ string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	var p map[string]any
	_ = json.Unmarshal(raw, &p)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, recordedEvent{typ, p})
	return nil
}

func (e *fakeEnv) Checkpoint(_ context.Context, transcript json.RawMessage) error {
	if !json.Valid(transcript) {
		return fmt.Errorf("invalid checkpoint JSON")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkpoints = append(e.checkpoints, transcript)
	return nil
}

func (e *fakeEnv) Post(_ context.Context, text string) (core.MessageID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.posted = append(e.posted, text)
	return core.MessageID(1000 + len(e.posted)), nil
}

func (e *fakeEnv) Todo(context.Context) ([]core.TodoItem, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.todo), nil
}

func (e *fakeEnv) SetTodo(_ context.Context, items []core.TodoItem) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.todo = slices.Clone(items)
	return nil
}

func (e *fakeEnv) eventTypes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.events))
	for i, ev := range e.events {
		out[i] = ev.Type
	}
	return out
}

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
	opts := Options{
		Providers: map[string]Provider{"default": {BaseURL: srv.URL(), APIKey: testKey, Model: "fake-model",
			Headers: map[string]string{"X-Team": "openbot"}}},
		Registry: reg,
	}
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

func execute(t *testing.T, a *Agent, job *core.Job) (core.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Execute(ctx, job)
}
