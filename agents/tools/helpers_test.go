package tools

import (
	"context"
	"encoding/json"
	"testing"

	"openbot/agents"
	"openbot/agents/agentstest"
	"openbot/core"
)

// fakeEnv is the shared in-memory core.RunEnv (agentstest.Env): it records
// todo lists and posts.
type fakeEnv struct{ agentstest.Env }

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
