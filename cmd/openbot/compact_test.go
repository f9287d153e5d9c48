package main

import (
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// compactingModel answers compaction calls with a summary that keeps the
// thread's code word, and everything else with a plain answer.
func compactingModel(t *testing.T) *openaitest.Server {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You compact a chat thread") {
			return openaitest.Text("Summary: the code word is PELICAN-9.")
		}
		return openaitest.Text("noted")
	})
	return llm
}

func compactions(llm *openaitest.Server) int {
	n := 0
	for _, r := range llm.Requests() {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You compact a chat thread") {
			n++
		}
	}
	return n
}

// TestChatCompact: /compact in the terminal compacts the thread now: the bot
// answers with what it summarised, the summary is stored as a message of its
// own kind that `openbot thread ID` shows and the chat never printed, and the
// next run's history starts with it.
func TestChatCompact(t *testing.T) {
	llm := compactingModel(t)
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("the code word is PELICAN-9\n"), env)
	if r.code != 0 {
		t.Fatalf("chat: exit %d: %s", r.code, r.stderr)
	}
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("/compact\n"), env)
	if r.code != 0 || !strings.Contains(r.stdout, "Compacted: 2 messages up to #2 summarised") {
		t.Fatalf("/compact: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "PELICAN") || compactions(llm) != 1 {
		t.Errorf("the summary was printed, or compactions = %d (want 1):\n%s", compactions(llm), r.stdout)
	}
	r = runFor(t, []string{"thread", "1", "--config", cfg}, nil, env)
	if r.code != 0 || !strings.Contains(r.stdout, "[summary of #1-#2, not posted]: Summary: the code word is PELICAN-9.") {
		t.Fatalf("openbot thread 1: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("what was the code word?\n"), env)
	if r.code != 0 {
		t.Fatalf("chat: exit %d: %s", r.code, r.stderr)
	}
	reqs := llm.Requests()
	if first := reqs[len(reqs)-1].Body.Messages[1].Content; !strings.Contains(first, "PELICAN-9") || !strings.Contains(first, "Your summary of this thread") {
		t.Errorf("the next run's history starts with %.200q, want the summary", first)
	}
}
