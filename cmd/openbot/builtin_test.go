package main

import (
	"os"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestChatWithoutConfigRunsTheBuiltInExample: `openbot chat` with no --config
// and no config.yaml runs the example team on the built-in config, says so in
// one line, and answers; without a model it says in one line how to set one.
// `openbot config example` prints that config, which is config.example.yaml.
func TestChatWithoutConfigRunsTheBuiltInExample(t *testing.T) {
	example, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // no config.yaml here; the store goes to ./data
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("hello from the example team"))
	r := runFor(t, []string{"chat"}, strings.NewReader("hi\n"), map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the example team") {
		t.Fatalf("chat without a config: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "built-in config") || !strings.Contains(r.stderr, "openbot config example > config.yaml") {
		t.Errorf("chat did not say it runs the built-in config:\n%s", r.stderr)
	}
	if _, err := os.Stat("data/openbot.db"); err != nil {
		t.Errorf("the store is not under ./data: %v", err)
	}

	r = runFor(t, []string{"chat"}, strings.NewReader("hi\n"), map[string]string{})
	if r.code != exitFail || !strings.Contains(r.stderr, "set OPENAI_API_KEY") {
		t.Errorf("chat without a model: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	r = runFor(t, []string{"config", "example"}, nil, nil)
	if r.code != 0 || r.stdout != string(example) {
		t.Errorf("config example: exit %d, %d bytes; want config.example.yaml's %d", r.code, len(r.stdout), len(example))
	}
}
