package tools

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"openbot/agents"
	"openbot/core"
)

// fakeEnv is a core.RunEnv recording todo lists and posts.
type fakeEnv struct {
	mu    sync.Mutex
	todo  []core.TodoItem
	posts []string
}

func (e *fakeEnv) Messages(context.Context, core.MessageID, int) ([]core.Message, error) {
	return nil, nil
}
func (e *fakeEnv) MessagesBefore(context.Context, core.MessageID, int) ([]core.Message, error) {
	return nil, nil
}
func (e *fakeEnv) Count(context.Context) (int, error)                { return 0, nil }
func (e *fakeEnv) RecordEvent(context.Context, string, any) error    { return nil }
func (e *fakeEnv) Checkpoint(context.Context, json.RawMessage) error { return nil }
func (e *fakeEnv) Todo(context.Context) ([]core.TodoItem, error)     { return e.todo, nil }
func (e *fakeEnv) SetTodo(_ context.Context, items []core.TodoItem) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.todo = items
	return nil
}
func (e *fakeEnv) Post(_ context.Context, text string) (core.MessageID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.posts = append(e.posts, text)
	return core.MessageID(100 + len(e.posts)), nil
}

// builtins returns the tools of opts by name.
func builtins(t *testing.T, opts Options) map[string]agents.Tool {
	t.Helper()
	list, err := Builtins(opts)
	if err != nil {
		t.Fatalf("Builtins: %v", err)
	}
	m := map[string]agents.Tool{}
	for _, tl := range list {
		if _, dup := m[tl.Name()]; dup {
			t.Fatalf("duplicate tool %q", tl.Name())
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.Schema(), &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("tool %q: schema is not a JSON object schema: %v %s", tl.Name(), err, tl.Schema())
		}
		if tl.Description() == "" {
			t.Fatalf("tool %q has no description", tl.Name())
		}
		m[tl.Name()] = tl
	}
	return m
}

// call invokes tool name with args marshalled to JSON in thread 7.
func call(t *testing.T, tl agents.Tool, env core.RunEnv, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Call(context.Background(), agents.ToolCall{
		Args:   raw,
		Env:    env,
		Bot:    core.BotProfile{Handle: "engineer"},
		Thread: 7,
		Run:    1,
	})
}
