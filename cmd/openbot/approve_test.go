package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestChatApproveAndReject is the terminal test of approvals (DESIGN.md §5): the engineer's shell call
// pauses for approval; "/approve" runs it once, "/reject" tells the model who
// rejected it and runs nothing. Scripted input waits for each question.
func TestChatApproveAndReject(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		ms := r.Body.Messages
		last := ms[len(ms)-1]
		if last.Role == "tool" {
			return openaitest.Text("shell said: " + strings.TrimSpace(last.Content))
		}
		return openaitest.Calls(openaitest.Call("shell", `{"command":"echo ran >> ran.txt; echo ok"}`))
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	input := "@engineer run the script\n/approve\n/new\n@engineer run it again\n/reject\n"
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader(input), map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	out := r.stdout
	for _, want := range []string{
		"[engineer] ❓ question 1:", "tool shell", "/approve 1 · /reject 1",
		"[system] question 1: Approved by you",
		"[engineer] ❓ question 2:",
		"[system] question 2: Rejected by you",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "shell said:") || !strings.Contains(out, "ok") {
		t.Errorf("the approved command's output did not reach the model:\n%s", out)
	}
	if !strings.Contains(out, "rejected by you") {
		t.Errorf("the rejection did not reach the model:\n%s", out)
	}
	// The approved command ran exactly once; the rejected one never did.
	matches, _ := filepath.Glob(filepath.Join(dir, "ws", "*", "ran.txt"))
	lines := 0
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		lines += strings.Count(string(b), "ran\n")
	}
	if lines != 1 {
		t.Fatalf("ran.txt has %d lines across %v, want 1", lines, matches)
	}
}

// TestChatInputEndsWithQuestionOpen: piped input that ends while a question waits
// says so, and the question stays for the next chat.
func TestChatInputEndsWithQuestionOpen(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Calls(openaitest.Call("shell", `{"command":"echo hi"}`))
	})
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("@engineer run it\n"), env)
	if r.code != 0 || !strings.Contains(r.stdout, "input ended; still waiting for an answer") || !strings.Contains(r.stdout, "/approve 1 or /reject 1") {
		t.Fatalf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
	// The next chat lists it at start and can approve it.
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("/approve 1\n"), env)
	if !strings.Contains(r.stdout, "waiting for your answer:") || !strings.Contains(r.stdout, "question 1: Approved by you") {
		t.Fatalf("second chat stdout:\n%s", r.stdout)
	}
}
