package main

import (
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestChatNewSurvivesRestart: a bare /new typed just before the chat ends is
// kept in the store (like Telegram's, Feishu's and Slack's), so the first
// message of the next chat (a new process: reopened store, new engine) starts
// a new thread instead of joining the old one.
func TestChatNewSurvivesRestart(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("noted") })
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	if r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("first\n/new\n"), env); r.code != 0 {
		t.Fatalf("first chat: exit %d: %s", r.code, r.stderr)
	}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("fourth\n/threads\n"), env)
	if r.code != 0 {
		t.Fatalf("second chat: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "* #2  fourth") || !strings.Contains(r.stdout, "  #1  first") {
		t.Fatalf("after /new and a restart, want \"fourth\" to start thread #2; stdout:\n%s", r.stdout)
	}
	// Once used, the /new is spent: the next chat continues thread #2.
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("fifth\n/threads\n"), env)
	if strings.Contains(r.stdout, "#3") || !strings.Contains(r.stdout, "* #2") {
		t.Fatalf("a spent /new started another thread; stdout:\n%s", r.stdout)
	}
}
