package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"openbot/core"
)

func TestAnswerCommands(t *testing.T) {
	eng := &fakeEngine{pending: []core.Question{
		{ID: 4, Kind: core.QuestionApproval, Tool: "shell"},
		{ID: 7, Kind: core.QuestionAsk, Choices: []string{"staging", "prod"}},
		{ID: 9, Kind: core.QuestionAsk},
	}}
	var out syncBuffer
	a := newAdapter(t, eng, "/approve 4\n/reject 4\n/answer 7 2\n/answer 7 Staging\n/answer 9 use the blue one\n/answer 7 moon\n/approve 9\n/approve 12\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []core.Answer{
		{Question: 4, Choice: core.ChoiceApprove},
		{Question: 4, Choice: core.ChoiceReject},
		{Question: 7, Choice: 1},
		{Question: 7, Choice: 0},
		{Question: 9, Choice: -1, Text: "use the blue one"},
	}
	if len(eng.answers) != len(want) {
		t.Fatalf("answers = %+v, want %d", eng.answers, len(want))
	}
	for i, w := range want {
		g := eng.answers[i]
		if g.Question != w.Question || g.Choice != w.Choice || g.Text != w.Text || g.Actor != Human || g.Account != "console/dev" {
			t.Errorf("answer %d = %+v, want %+v from console:you", i, g, w)
		}
	}
	s := out.String()
	for _, msg := range []string{"one of the choices of question 7", "question 9 asks for an answer", "there is no question 12"} {
		if !strings.Contains(s, msg) {
			t.Errorf("output lacks %q:\n%s", msg, s)
		}
	}
}

// consoleThreads are threads 1 to n bound to the "console/dev" account.
func consoleThreads(n int) []core.Thread {
	var out []core.Thread
	for i := 1; i <= n; i++ {
		out = append(out, core.Thread{ID: core.ThreadID(i), Title: fmt.Sprintf("task %d", i),
			Bindings: []core.Binding{{Platform: "console", Accounts: []core.AccountID{"console/dev"}}}})
	}
	return out
}

// TestApproveWithoutNumber: a bare /approve takes the only approval waiting in
// the current thread (known after a restart from the console's thread key); with
// several, or none there, it refuses and lists them.
func TestApproveWithoutNumber(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pending []core.Question
		current core.ThreadID
		want    core.QuestionID // 0: refused
		says    []string
	}{
		{"only one in this thread", []core.Question{{ID: 2, Thread: 1, Kind: core.QuestionApproval}, {ID: 5, Thread: 2, Kind: core.QuestionApproval}, {ID: 6, Thread: 2, Kind: core.QuestionAsk}}, 2, 5, nil},
		{"only one, older", []core.Question{{ID: 2, Thread: 1, Kind: core.QuestionApproval}, {ID: 5, Thread: 2, Kind: core.QuestionApproval}}, 1, 2, nil},
		{"several here", []core.Question{{ID: 2, Thread: 1, Kind: core.QuestionApproval}, {ID: 5, Thread: 1, Kind: core.QuestionApproval}}, 1, 0,
			[]string{"2 approvals are waiting in this thread; say which with /approve N:", "question 2 in thread #1", "question 5 in thread #1"}},
		{"none here", []core.Question{{ID: 2, Thread: 1, Kind: core.QuestionApproval}}, 2, 0,
			[]string{"no approval is waiting in this thread; say which with /approve N:", "question 2 in thread #1 (", "→ /approve 2 or /reject 2"}},
		{"no current thread", []core.Question{{ID: 2, Thread: 1, Kind: core.QuestionApproval}}, 0, 0,
			[]string{"no approval is waiting yet: this console has no current thread", "question 2 in thread #1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{pending: tt.pending, threads: consoleThreads(2), byKey: map[string]core.ThreadID{}}
			if tt.current != 0 {
				eng.byKey["console:dev"] = tt.current
			}
			var out syncBuffer
			a := newAdapter(t, eng, "/approve\n", &out)
			if err := a.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == 0 && len(eng.answers) != 0:
				t.Fatalf("answers = %+v, want the bare /approve refused", eng.answers)
			case tt.want != 0 && (len(eng.answers) != 1 || eng.answers[0].Question != tt.want):
				t.Fatalf("answers = %+v, want question %d", eng.answers, tt.want)
			}
			for _, want := range tt.says {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestThreadsMarksCurrentAfterRestart: a console started again marks the thread
// its key is bound to as the current one.
func TestThreadsMarksCurrentAfterRestart(t *testing.T) {
	eng := &fakeEngine{threads: consoleThreads(3), byKey: map[string]core.ThreadID{"console:dev": 2}}
	var out syncBuffer
	a := newAdapter(t, eng, "/threads\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "\n * #2  task 2") || strings.Contains(s, "* #1") || strings.Contains(s, "* #3") {
		t.Errorf("/threads after a restart does not mark thread 2:\n%s", s)
	}
}

func TestPostAndResolveQuestion(t *testing.T) {
	var out syncBuffer
	a := newAdapter(t, &fakeEngine{}, "", &out)
	q := core.Question{ID: 3, Thread: 1, Kind: core.QuestionApproval, Text: "@engineer wants to run shell", Tool: "shell", Args: json.RawMessage(`{"command":"ls"}`)}
	if _, err := a.PostQuestion(context.Background(), core.QuestionDelivery{Question: q, Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer"}}); err != nil {
		t.Fatal(err)
	}
	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "you"
	if err := a.ResolveQuestion(context.Background(), core.QuestionDelivery{Question: q}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"[engineer] ❓ question 3: @engineer wants to run shell", "tool shell, command:\n     ls\n", "/approve 3 · /reject 3", "[system] question 3: Approved by you"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestLongLineRefusedAndReadingGoesOn(t *testing.T) {
	eng := &fakeEngine{}
	var out syncBuffer
	a := newAdapter(t, eng, strings.Repeat("x", maxLine+10)+"\nafter\n//usr/bin is a path\n/switch 99\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := eng.inbounds()
	if len(got) != 2 || got[0].Text != "after" || got[1].Text != "/usr/bin is a path" {
		t.Fatalf("ingested %+v, want the lines after the long one, with // escaping a leading /", got)
	}
	if !strings.Contains(out.String(), "line not sent") || !strings.Contains(out.String(), "there is no thread #99") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestAnswerArgumentMistakes(t *testing.T) {
	eng := &fakeEngine{
		pending: []core.Question{{ID: 8, Kind: core.QuestionApproval, Thread: 1}, {ID: 10, Kind: core.QuestionAsk, Choices: []string{"a", "b"}, Thread: 1}},
		decided: []core.Question{{ID: 3, Kind: core.QuestionApproval, Status: core.QuestionAnswered, Choice: core.ChoiceApprove, AnsweredByName: "you"}},
		threads: []core.Thread{{ID: 1, Bindings: []core.Binding{{Platform: "console", Accounts: []core.AccountID{"console/dev"}}}}},
		byKey:   map[string]core.ThreadID{"console:dev": 1},
	}
	var out syncBuffer
	a := newAdapter(t, eng, "/approve 8x\n/reject abc\n/approve 3\n/answer 3 yes\n/answer 2\n/questions\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(eng.answers) != 1 || eng.answers[0].Question != 10 || eng.answers[0].Choice != 1 {
		t.Fatalf("answers = %+v, want only /answer 2 as choice 2 of question 10", eng.answers)
	}
	s := out.String()
	if n := strings.Count(s, "question 3 was already decided"); n != 2 {
		t.Errorf("/approve 3 and /answer 3 yes on a decided question: %d explanations, want 2:\n%s", n, s)
	}
	for _, want := range []string{`"8x" is not a question number`, `"abc" is not a question number`, "question 3 was already decided: Approved by you",
		"waiting for your answer:", "question 8 in thread #1", "/approve 8 or /reject 8", "question 10 in thread #1"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

// TestPostQuestionShowsReach: an approval says what the tool can reach.
func TestPostQuestionShowsReach(t *testing.T) {
	var out syncBuffer
	a := newAdapter(t, &fakeEngine{}, "", &out)
	q := core.Question{ID: 3, Thread: 1, Kind: core.QuestionApproval, Text: "@engineer wants to run shell", Tool: "shell",
		Args: json.RawMessage(`{"command":"ls"}`), Reach: "runs in the sandbox with network off"}
	if _, err := a.PostQuestion(context.Background(), core.QuestionDelivery{Question: q, Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer"}}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "\n   reach: runs in the sandbox with network off\n   /approve 3 · /reject 3") {
		t.Errorf("output lacks the reach:\n%s", s)
	}
}

// TestPostQuestionShowsTheWholeCommand: a long command is printed whole, with
// the warnings above it and the timeout in the reach.
func TestPostQuestionShowsTheWholeCommand(t *testing.T) {
	var out syncBuffer
	a := newAdapter(t, &fakeEngine{}, "", &out)
	cmd := "echo " + strings.Repeat("QUJD", 2500) + " | base64 -d | sh"
	args, _ := json.Marshal(map[string]any{"command": cmd, "timeout_seconds": 60})
	q := core.Question{ID: 5, Thread: 1, Kind: core.QuestionApproval, Text: "@engineer wants to run shell.", Tool: "shell", Args: args,
		Reach: "runs in a sandbox. Timeout: 60 s.", Warnings: []string{"This command decodes hidden content (base64) and runs it."}}
	if _, err := a.PostQuestion(context.Background(), core.QuestionDelivery{Question: q, Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer"}}); err != nil {
		t.Fatal(err)
	}
	want := "\n   ⚠ This command decodes hidden content (base64) and runs it.\n   tool shell, command:\n     " + cmd + "\n   reach: runs in a sandbox. Timeout: 60 s.\n"
	if s := out.String(); !strings.Contains(s, want) {
		t.Errorf("output lacks the warning, the whole command and the timeout:\n%.400s", s)
	}
}
