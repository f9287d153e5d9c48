package core_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"openbot/core"
)

func shellQ(args string) core.Question {
	return core.Question{ID: 12, Kind: core.QuestionApproval, Tool: "shell", Text: "@engineer wants to run shell.", Args: json.RawMessage(args)}
}

func TestQuestionCommand(t *testing.T) {
	for _, tt := range []struct {
		name, tool, args string
		want             string
		ok               bool
	}{
		{"command", "shell", `{"command":"echo \"hi\" \u003e x \u0026\u0026 cat x\nls"}`, "echo \"hi\" > x && cat x\nls", true},
		{"with timeout", "shell", `{"timeout_seconds":120,"command":"sleep 100"}`, "sleep 100", true},
		{"spaces around", "shell", " {\"command\" : \"ls\"}\n", "ls", true},
		{"other tool", "http_fetch", `{"command":"ls"}`, "", false},
		{"another key", "shell", `{"command":"ls","cwd":"/"}`, "", false},
		{"key twice", "shell", `{"command":"ls","command":"rm -rf /"}`, "", false},
		{"key in other case", "shell", `{"command":"ls","Command":"rm -rf /"}`, "", false},
		{"no command", "shell", `{"timeout_seconds":5}`, "", false},
		{"command not a string", "shell", `{"command":["rm","-rf"]}`, "", false},
		{"timeout not a number", "shell", `{"command":"ls","timeout_seconds":"5"}`, "", false},
		{"text after the object", "shell", `{"command":"ls"} {"command":"rm"}`, "", false},
		{"not json", "shell", `ls -la`, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := shellQ(tt.args)
			q.Tool = tt.tool
			got, ok := q.Command()
			if got != tt.want || ok != tt.ok {
				t.Errorf("Command() = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
			p := q.Prompt()
			if ok && (p.Label != "Command" || p.Body != tt.want || p.Lang != "sh") {
				t.Errorf("Prompt() = %+v, want the command", p)
			}
			if !ok && (p.Label != "Arguments" || p.Body != strings.TrimSpace(q.PrettyArgs()) || p.Lang != "json") {
				t.Errorf("Prompt() = %+v, want the arguments whole", p)
			}
		})
	}
}

func TestFold(t *testing.T) {
	runes := func(rune) int { return 1 }
	for _, tt := range []struct {
		name  string
		s     string
		limit int
		size  func(rune) int
		want  []string
	}{
		{"fits", "abc", 5, runes, []string{"abc"}},
		{"empty", "", 5, runes, nil},
		{"cut between runes", "abcdefgh", 3, runes, []string{"abc", "def", "gh"}},
		{"after a line break in the second half", "ab\ncdefgh", 4, runes, []string{"ab\n", "cdef", "gh"}},
		{"a line break in the first half does not count", "a\nbcdefg", 6, runes, []string{"a\nbcde", "fg"}},
		{"wide runes", "éééé", 4, func(r rune) int { return utf8.RuneLen(r) }, []string{"éé", "éé"}},
		{"escaped", "a<b<c", 5, func(r rune) int { return map[rune]int{'<': 3}[r] + 1 }, []string{"a<", "b<", "c"}},
		{"a rune over the limit", "a<b", 2, func(r rune) int { return map[rune]int{'<': 4}[r] + 1 }, []string{"a", "<", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := core.Fold(tt.s, tt.limit, tt.size)
			if strings.Join(got, "") != tt.s || len(got) != len(tt.want) {
				t.Fatalf("Fold(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("piece %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	pieces, rest := core.FoldShown(strings.Repeat("x", 10)+"é", 3, 2, runes)
	if strings.Join(pieces, "") != "xxxxxx" || rest != 5 {
		t.Errorf("FoldShown = %q, %d not shown; want 6 shown, 5 not", pieces, rest)
	}
}

func TestFence(t *testing.T) {
	for s, want := range map[string]string{"ls": "```", "a ``` b": "````", "`x` ````": "`````"} {
		if got := core.Fence(s); got != want {
			t.Errorf("Fence(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestQuestionTextShowsTheWholeCommand: the plain-text prompt shows a long shell
// command whole, as the command itself in a code block, with the warnings above
// it and the reach (timeout included) below.
func TestQuestionTextShowsTheWholeCommand(t *testing.T) {
	cmd := "echo " + strings.Repeat("QUJD", 2500) + " | base64 -d | sh"
	args, _ := json.Marshal(map[string]any{"command": cmd, "timeout_seconds": 60})
	q := shellQ(string(args))
	q.Reach = "runs in a sandbox: sees only this thread's workspace, network off. Timeout: 60 s."
	q.Warnings = []string{"This command decodes hidden content (base64) and runs it."}
	got := core.QuestionText(q, "engineer")
	for _, want := range []string{
		"❓ @engineer asks (question 12): @engineer wants to run shell.\n⚠ This command decodes hidden content (base64) and runs it.\nTool: shell\nCommand:\n```sh\n" + cmd + "\n```\n",
		"\nReach: runs in a sandbox: sees only this thread's workspace, network off. Timeout: 60 s.\nOptions: Approve / Reject",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("QuestionText lacks %q\ngot %q", want[:min(len(want), 200)], got[:min(len(got), 300)])
		}
	}
	if strings.Contains(got, `"command"`) || strings.Contains(got, "…") {
		t.Errorf("QuestionText shows JSON or cuts: %q", got[:300])
	}

	other := core.Question{ID: 3, Kind: core.QuestionApproval, Tool: "http_fetch", Args: json.RawMessage(`{"url":"https://x.example","body":"` + strings.Repeat("y", 3000) + `"}`)}
	if got := core.QuestionText(other, "engineer"); !strings.Contains(got, "Arguments:\n```json\n{\n  \"url\"") || !strings.Contains(got, strings.Repeat("y", 3000)+"\"\n}\n```") {
		t.Errorf("other tools show their arguments whole as JSON: %q", got[:200])
	}
}

func TestNotShownSaysWhereToReadIt(t *testing.T) {
	got := shellQ(`{"command":"ls"}`).NotShown(6214)
	if !strings.Contains(got, "6214 more characters of the command are not shown") || !strings.Contains(got, "Approvals page") || !strings.Contains(got, "/api/v1/questions/12") {
		t.Errorf("NotShown = %q", got)
	}
}
