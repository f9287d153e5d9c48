package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

// TestReflectionAfterReloadUsesNewModel: a reload that changes the llm
// profile's model reaches reflection without a restart: the reflection of a
// run, flushed when the chat ends, calls the reloaded model.
func TestReflectionAfterReloadUsesNewModel(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You maintain the long-term memory of @") {
			return openaitest.Text(`{"operations": []}`)
		}
		return openaitest.Text("noted-answer")
	})
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	dir := t.TempDir()
	bot := "  - {handle: chief_of_staff, memory: true}\n"
	path := reloadConfig(t, dir, bot)

	stdin, feed := io.Pipe()
	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"chat", "--config", path}, stdin, &out, &errb, envOf(env)) }()
	if _, err := io.WriteString(feed, "the deploy window is friday\n"); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), "noted-answer") {
		select {
		case <-ctx.Done():
			t.Fatalf("no answer; stderr:\n%s", errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(old), "model: m}", "model: m2}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runFor(t, []string{"reload", "--config", path}, strings.NewReader(""), env); r.code != 0 {
		t.Fatalf("openbot reload exit %d: %s", r.code, r.stderr)
	}
	waitLog(t, dir, "config reloaded")
	feed.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("chat did not end")
	}
	var models []string
	for _, r := range llm.Requests() {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You maintain the long-term memory of @") {
			models = append(models, r.Body.Model)
		}
	}
	if len(models) != 1 || models[0] != "m2" {
		t.Errorf("reflection calls used models %q, want one call to the reloaded m2", models)
	}
}
