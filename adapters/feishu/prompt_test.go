package feishu_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

var codeBlock = regexp.MustCompile("(?s)Tool `shell` command[^\n]*:\n```sh\n(.*?)\n```")

// commandOf is the command shown in the code blocks of cards, joined.
func commandOf(cards ...string) string {
	var b strings.Builder
	for _, c := range cards {
		for _, m := range codeBlock.FindAllStringSubmatch(feishutest.CardText(c), -1) {
			b.WriteString(strings.ReplaceAll(m[1], "\u200b", ""))
		}
	}
	return b.String()
}

// longCommand is a shell command of n characters with the characters JSON
// escapes, Chinese, backticks and no line breaks.
func longCommand(n int) string {
	return adaptertest.LongCommand("echo \"a<b>&c\" ``` 你好 | base64 -d | sh; ", n)
}

func shellApproval(t *testing.T, cmd string) core.Question {
	return adaptertest.ShellApproval(approvalQ(), cmd, 60)
}

// TestApprovalShowsLongCommandWhole: a 10,000-character shell command (and a
// 20,000-character one) is posted whole, as the command itself in code blocks,
// over as many cards as Feishu's 30 KB allow (the fake refuses larger ones), the
// buttons on the last; the warning and the timeout are shown; a retry posts
// nothing twice; the resolved last card stays within the limit.
func TestApprovalShowsLongCommandWhole(t *testing.T) {
	for _, tt := range []struct{ size, minCards int }{{10000, 1}, {20000, 2}} {
		h := newHarness(t, nil)
		ctx := ctxT(t)
		cmd := longCommand(tt.size)
		d := core.QuestionDelivery{Outbox: 42, Conversation: topicConv, ReplyTo: "om_trigger", Question: shellApproval(t, cmd),
			Sender: core.Sender{Actor: core.BotActorID("engineer"), Handle: "engineer", Name: "Engineer"}}
		id, err := h.a.PostQuestion(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		ms := h.srv.Messages()
		if len(ms) < tt.minCards {
			t.Fatalf("%d characters: %d cards, want at least %d", tt.size, len(ms), tt.minCards)
		}
		var cards []string
		for i, m := range ms {
			cards = append(cards, m.Content)
			if hasButtons := len(m.Buttons()) > 0; hasButtons != (i == len(ms)-1) {
				t.Errorf("card %d: buttons %v; want them on the last card only", i+1, hasButtons)
			}
		}
		if got := commandOf(cards...); got != cmd {
			t.Errorf("the cards show %d characters of the command; want all %d", len([]rune(got)), len([]rune(cmd)))
		}
		if id != ms[len(ms)-1].ID {
			t.Errorf("PostQuestion returned %q, want the last card %q", id, ms[len(ms)-1].ID)
		}
		label := "Tool `shell` command:"
		if len(ms) > 1 {
			label = "Tool `shell` command (part 1 of "
		}
		first, last := feishutest.CardText(cards[0]), feishutest.CardText(cards[len(cards)-1])
		if !strings.HasPrefix(first, "@engineer wants to run shell.\n⚠️ **This command decodes hidden content (base64) and runs it") || !strings.Contains(first, label) {
			t.Errorf("first card %.300q; want the warning under the question and %q", first, label)
		}
		if !strings.Contains(last, "**Reach:** runs in a sandbox") || !strings.Contains(last, "Timeout: 60 s.") {
			t.Errorf("last card %.300q; want the reach with the timeout", last[len(last)-300:])
		}
		if _, err := h.a.PostQuestion(ctx, d); err != nil || len(h.srv.Messages()) != len(ms) {
			t.Errorf("retry: %v, %d cards; want none posted twice", err, len(h.srv.Messages()))
		}

		d.Question.Status, d.Question.Choice, d.Question.AnsweredByName = core.QuestionAnswered, core.ChoiceReject, "Bob"
		d.PlatformID = id
		if err := h.a.ResolveQuestion(ctx, d); err != nil {
			t.Fatal(err)
		}
		if p := h.srv.Patches(); len(p) != 1 || commandOf(p[0].Content) != commandOf(cards[len(cards)-1]) || !strings.Contains(feishutest.CardText(p[0].Content), "Rejected by Bob") {
			t.Errorf("patches %d; want the last card with its part of the command and the decision", len(p))
		}
	}
}

// TestApprovalTooLongSaysWhatIsNotShown: a command longer than the cards of one
// question hold is shown as far as they go; the last card says how many
// characters are not shown and where to read the whole.
func TestApprovalTooLongSaysWhatIsNotShown(t *testing.T) {
	q := shellApproval(t, longCommand(60000))
	cards := feishu.QuestionCards(q, "", false)
	if len(cards) != 4 {
		t.Fatalf("%d cards, want 4", len(cards))
	}
	for i, c := range cards {
		if n := len(c); n > feishutest.MaxCardBody {
			t.Errorf("card %d is %d bytes", i+1, n)
		}
	}
	cmd := q.Prompt().Body
	shown := commandOf(cards...)
	if !strings.HasPrefix(cmd, shown) {
		t.Fatal("the shown part is not the command's beginning")
	}
	want := "**" + feishu.Format(q.NotShown(len([]rune(cmd))-len([]rune(shown)))) + "**"
	if last := feishutest.CardText(cards[3]); !strings.Contains(last, want) {
		t.Errorf("last card %q; want the note %q", last[len(last)-400:], want)
	}
}

// TestWarningTurnsTheHeaderRed: a pending approval with a warning has a red
// header that says so; without one it stays orange.
func TestWarningTurnsTheHeaderRed(t *testing.T) {
	header := func(card string) (title, tmpl string) {
		var c struct {
			Header struct {
				Title    struct{ Content string } `json:"title"`
				Template string                   `json:"template"`
			} `json:"header"`
		}
		_ = json.Unmarshal([]byte(card), &c)
		return c.Header.Title.Content, c.Header.Template
	}
	if title, tmpl := header(feishu.QuestionCard(shellApproval(t, "echo aGk= | base64 -d | sh"), "", false)); tmpl != "red" || !strings.Contains(title, "⚠") {
		t.Errorf("header %q %s, want a red one with ⚠", title, tmpl)
	}
	if title, tmpl := header(feishu.QuestionCard(approvalQ(), "", false)); tmpl != "orange" || title != "Approval needed" {
		t.Errorf("header %q %s, want orange Approval needed", title, tmpl)
	}
}
