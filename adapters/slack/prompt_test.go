package slack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

// commandOf is the command shown in the code sections of blocks: labels and
// fences taken off, Slack's escapes undone, pieces joined.
func commandOf(t *testing.T, bs []block) string {
	t.Helper()
	var b strings.Builder
	for _, bl := range bs {
		if !strings.HasPrefix(bl.BlockID, blockArgs) {
			continue
		}
		text := bl.Text.Text
		start := strings.Index(text, "```\n")
		if start < 0 || !strings.HasSuffix(text, "\n```") {
			t.Fatalf("code section %q", text[:min(len(text), 80)])
		}
		inner := text[start+4 : len(text)-4]
		inner = strings.NewReplacer("\u200b", "", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(inner)
		b.WriteString(inner)
	}
	return b.String()
}

// longCommand is a shell command of n characters with the characters Slack
// escapes, backticks and no line breaks.
func longCommand(n int) string {
	return adaptertest.LongCommand("echo 'a<b>&c' ``` | base64 -d | sh; ", n)
}

func shellApproval(t *testing.T, cmd string, timeout int) core.Question {
	return adaptertest.ShellApproval(approval(""), cmd, timeout)
}

// TestApprovalShowsLongCommandWhole: a 10,000-character shell command is posted
// whole, as the command itself in code sections within Slack's limits (the fake
// refuses a message beyond them), over as many messages as it needs with the
// buttons under the last; the warning and the timeout are shown.
func TestApprovalShowsLongCommandWhole(t *testing.T) {
	e := newEnv(t, nil)
	cmd := longCommand(10000)
	ts, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Outbox: 5, Conversation: conv, Sender: engineer, Question: shellApproval(t, cmd, 60)})
	if err != nil {
		t.Fatal(err)
	}
	posts := e.slack.CallsTo("chat.postMessage")
	if len(posts) < 2 || len(posts) > maxQuestionMessages {
		t.Fatalf("%d messages, want the command over 2 or 3", len(posts))
	}
	var all []block
	for i, p := range posts {
		bs := blocksOf(t, p)
		all = append(all, bs...)
		if hasActions := findBlock(bs, "actions") != nil; hasActions != (i == len(posts)-1) {
			t.Errorf("message %d: buttons %v; want them under the last message only", i, hasActions)
		}
	}
	if got := commandOf(t, all); got != cmd {
		t.Errorf("the messages show %d characters of the command; want all %d", len(got), len(cmd))
	}
	if ts != e.slack.Messages()[len(posts)-1].TS {
		t.Errorf("PostQuestion returned %q, want the ts of the message with the buttons", ts)
	}
	first := blocksOf(t, posts[0])
	if first[1].BlockID != blockWarnings || !strings.Contains(first[1].Text.Text, "⚠️ *This command decodes hidden content (base64) and runs it") {
		t.Errorf("second block %+v, want the warning right under the question", first[1])
	}
	if !strings.Contains(first[2].Text.Text, "`shell` command: _(part 1 of ") {
		t.Errorf("first code section %q, want it labelled as a part", first[2].Text.Text[:60])
	}
	last := blocksOf(t, posts[len(posts)-1])
	if r := findBlockID(last, blockReach); r == nil || !strings.Contains(r.Text.Text, "Timeout: 60 s.") {
		t.Errorf("last message lacks the reach with the timeout: %+v", last)
	}
	if !strings.Contains(posts[0].Form.Get("text"), "(⚠ 1 warning)") {
		t.Errorf("notification text %q, want the warning counted", posts[0].Form.Get("text"))
	}

	// The decision replaces the buttons of the last message, within the limits.
	q := shellApproval(t, cmd, 60)
	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceReject, "Alice"
	if err := e.a.ResolveQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Sender: engineer, Question: q, PlatformID: ts}); err != nil {
		t.Fatal(err)
	}
	up := blocksOf(t, e.slack.CallsTo("chat.update")[0])
	if findBlockID(up, blockReach) == nil || findBlock(up, "actions") != nil || !strings.Contains(contextText(t, e.slack.CallsTo("chat.update")[0]), "Rejected by Alice") {
		t.Errorf("resolved blocks %+v", up)
	}
}

// TestApprovalTooLongSaysWhatIsNotShown: a command longer than three messages
// hold is shown as far as they go, then a line says how many characters are
// not shown and where to read the whole.
func TestApprovalTooLongSaysWhatIsNotShown(t *testing.T) {
	e := newEnv(t, nil)
	cmd := longCommand(100000)
	if _, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Outbox: 6, Conversation: conv, Sender: engineer, Question: shellApproval(t, cmd, 60)}); err != nil {
		t.Fatal(err)
	}
	posts := e.slack.CallsTo("chat.postMessage")
	if len(posts) != maxQuestionMessages {
		t.Fatalf("%d messages, want %d", len(posts), maxQuestionMessages)
	}
	var all []block
	for _, p := range posts {
		all = append(all, blocksOf(t, p)...)
	}
	shown := commandOf(t, all)
	if !strings.HasPrefix(cmd, shown) {
		t.Fatal("the shown part is not the command's beginning")
	}
	note := findBlockID(all, blockNotShown)
	want := core.Question{ID: 7, Kind: core.QuestionApproval, Tool: "shell", Args: json.RawMessage(`{"command":""}`)}.NotShown(len(cmd) - len(shown))
	if note == nil || note.Text.Text != "*"+want+"*" {
		t.Errorf("note %+v, want %q", note, want)
	}
}

// TestApprovalPartsNotPostedTwice: when Slack refuses the second part (a 429), the
// retry posts only what is missing.
func TestApprovalPartsNotPostedTwice(t *testing.T) {
	e := newEnv(t, nil)
	d := core.QuestionDelivery{Outbox: 8, Conversation: conv, Sender: engineer, Question: shellApproval(t, longCommand(10000), 60)}
	e.slack.FailAfter("chat.postMessage", 1, http.StatusTooManyRequests, "", time.Second)
	if _, err := e.a.PostQuestion(t.Context(), d); err == nil {
		t.Fatal("want the 429")
	}
	if _, err := e.a.PostQuestion(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	calls := e.slack.CallsTo("chat.postMessage")
	if n := len(e.slack.Messages()); n != 2 || len(calls) != 3 || calls[1].Form.Get("blocks") != calls[2].Form.Get("blocks") {
		t.Fatalf("%d messages after %d posts; want 2, the refused second part posted again and the first not", n, len(calls))
	}
	if got := commandOf(t, append(blocksOf(t, calls[0]), blocksOf(t, calls[2])...)); got != d.Question.Prompt().Body {
		t.Errorf("the messages show %d characters, want the command once", len(got))
	}
}

func findBlockID(bs []block, id string) *block {
	for i := range bs {
		if bs[i].BlockID == id {
			return &bs[i]
		}
	}
	return nil
}
