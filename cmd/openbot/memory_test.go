package main

import (
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestChatMemoryTrulyWorks: with config.example.yaml as shipped (the engineer
// has memory: true), a chat session's reflection, flushed at shutdown, stores a
// note that the engineer's run in the next session has in its prompt.
func TestChatMemoryTrulyWorks(t *testing.T) {
	const note = "The team wants status updates as three bullet points."
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You maintain the long-term memory of @engineer") {
			return openaitest.Text(`{"operations": [{"op": "insert", "text": "` + note + `"}]}`)
		}
		return openaitest.Text("ok")
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("@engineer status updates: three bullets, always\n"), env); r.code != 0 {
		t.Fatalf("first session: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("@engineer post the status update\n"), env); r.code != 0 {
		t.Fatalf("second session: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var found bool
	for _, r := range llm.Requests() {
		if strings.Contains(openaitest.LastUserText(r), "post the status update") {
			// Recalled memories are part of the turn's context, in the newest turn.
			found = strings.Contains(openaitest.LastUserText(r), note)
			if !found {
				t.Errorf("the engineer's prompt lacks its memory:\n%s", openaitest.LastUserText(r))
			}
		}
	}
	if !found {
		t.Error("no run of the engineer in the second session")
	}
	r := runFor(t, []string{"memory", "list", "--bot", "engineer", "--config", cfg}, nil, env)
	if r.code != 0 || !strings.Contains(r.stdout, note) || !strings.Contains(r.stdout, "reflection") {
		t.Errorf("openbot memory list: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestMemoryCLI: openbot memory show, edit and rm over the store file; rm and
// edit refuse a memory of another bot.
func TestMemoryCLI(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You maintain the long-term memory of @engineer") {
			return openaitest.Text(`{"operations": [{"op": "insert", "text": "Run go vet before every commit."}]}`)
		}
		return openaitest.Text("ok")
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("@engineer vet it\n"), env); r.code != 0 {
		t.Fatalf("chat: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	mem := func(stdin string, args ...string) result {
		return runFor(t, append([]string{"memory"}, append(args, "--config", cfg)...), strings.NewReader(stdin), env)
	}
	if r := mem("", "show", "1"); r.code != 0 || !strings.Contains(r.stdout, "Run go vet before every commit.") || !strings.Contains(r.stdout, "reflection (run ") {
		t.Errorf("show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := mem("", "rm", "1", "--bot", "qa"); r.code == 0 || !strings.Contains(r.stderr, "not @qa's") {
		t.Errorf("rm with another bot: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := mem("Run go vet and staticcheck before every commit.\n", "edit", "1", "--bot", "engineer"); r.code != 0 {
		t.Errorf("edit: exit %d\n%s", r.code, r.stderr)
	}
	if r := mem("", "list", "--bot", "engineer"); !strings.Contains(r.stdout, "staticcheck") || !strings.Contains(r.stdout, "operator") {
		t.Errorf("list after edit:\n%s%s", r.stdout, r.stderr)
	}
	if r := mem("", "list"); r.code != 0 || !strings.Contains(r.stdout, "@engineer") || !strings.Contains(r.stdout, "staticcheck") {
		t.Errorf("list without --bot (every bot's): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := mem("", "rm", "#1", "--bot", "@engineer"); r.code != 0 {
		t.Errorf("rm: exit %d\n%s", r.code, r.stderr)
	}
	if r := mem("", "list", "--bot", "engineer"); !strings.Contains(r.stdout, "has no memories") {
		t.Errorf("list after rm:\n%s%s", r.stdout, r.stderr)
	}
	if r := mem("", "list"); r.code != 0 || !strings.Contains(r.stdout, "no bot has memories") {
		t.Errorf("list without --bot after rm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
