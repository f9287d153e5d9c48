package telegram

import (
	"context"
	stdhtml "html"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"openbot/adapters/internal/adaptertest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

var preBlock = regexp.MustCompile(`(?s)<pre>(.*?)</pre>`)

// commandOf is the command shown in the <pre> blocks of texts, unescaped and joined.
func commandOf(texts ...string) string {
	var b strings.Builder
	for _, t := range texts {
		for _, m := range preBlock.FindAllStringSubmatch(t, -1) {
			b.WriteString(stdhtml.UnescapeString(m[1]))
		}
	}
	return b.String()
}

// longCommand is a shell command of n characters with the characters HTML
// escapes, some Chinese and no line breaks.
func longCommand(n int) string {
	return adaptertest.LongCommand(`echo "a<b>&c" 你好 | base64 -d | sh; `, n)
}

func shellApproval(t *testing.T, cmd string) core.Question {
	return adaptertest.ShellApproval(approval(), cmd, 60)
}

// TestApprovalShowsLongCommandWhole: a 10,000-character shell command is sent
// whole, as the command itself in <pre> blocks, over as many messages as
// Telegram's 4,096 allow (the fake refuses longer ones), the first replying to
// the asker's message and the keyboard under the last; the warning and the
// timeout are shown, and the resolved last message stays within the limit.
func TestApprovalShowsLongCommandWhole(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	cmd := longCommand(10000)
	d := qDelivery("-1001000000002:topic:42", shellApproval(t, cmd))
	id, err := a.PostQuestion(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	sends := e.srv.Calls("sendMessage")
	if len(sends) < 3 || len(sends) > maxQuestionMessages {
		t.Fatalf("%d messages, want the command over 3 to %d", len(sends), maxQuestionMessages)
	}
	var texts []string
	for i, c := range sends {
		texts = append(texts, c.Params["text"])
		if _, kb := c.Params["reply_markup"]; kb != (i == len(sends)-1) {
			t.Errorf("message %d: keyboard %v; want it under the last message only", i+1, kb)
		}
		if rt := telegramtest.ParseReplyTo(c); (rt == 43) != (i == 0) {
			t.Errorf("message %d replies to %d; want only the first to reply to 43", i+1, rt)
		}
	}
	if got := commandOf(texts...); got != cmd {
		t.Errorf("the messages show %d characters of the command; want all %d", len([]rune(got)), len([]rune(cmd)))
	}
	if msgs := e.srv.Messages(botToken); id == "" || id != strconv.FormatInt(msgs[len(msgs)-1].ID, 10) {
		t.Errorf("PostQuestion returned %q, want the id of the message with the keyboard", id)
	}
	if !strings.HasPrefix(texts[0], "@engineer wants to run shell.\n\n⚠️ <b>This command decodes hidden content (base64) and runs it") ||
		!strings.Contains(texts[0], "<b>shell</b> command: <i>(part 1 of ") || !strings.HasPrefix(texts[1], "<b>shell</b> command: <i>(part 2 of ") {
		t.Errorf("first message %q…, second %q…; want the warning under the question and the parts labelled", texts[0][:200], texts[1][:60])
	}
	if last := texts[len(texts)-1]; !strings.HasSuffix(last, "</pre>\n<i>Reach: runs in a sandbox: sees only this thread's workspace, network off. Timeout: 60 s.</i>") {
		t.Errorf("last message ends %q; want the reach with the timeout", last[len(last)-120:])
	}

	q := d.Question
	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, strings.Repeat("名", 200)
	d.Question, d.PlatformID = q, id
	if err := a.ResolveQuestion(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if edit := e.srv.Calls("editMessageText")[0].Params["text"]; commandOf(edit) != commandOf(texts[len(texts)-1]) || !strings.Contains(edit, "✅ Approved by") {
		t.Errorf("the resolved message %q… does not keep its part of the command with the decision", edit[:100])
	}
}

// TestApprovalTooLongSaysWhatIsNotShown: a command longer than the messages of
// one question hold is shown as far as they go; the last says how many
// characters are not shown and where to read the whole.
func TestApprovalTooLongSaysWhatIsNotShown(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	cmd := longCommand(60000)
	q := shellApproval(t, cmd)
	if _, err := a.PostQuestion(context.Background(), qDelivery("100000001", q)); err != nil {
		t.Fatal(err)
	}
	sends := e.srv.Calls("sendMessage")
	if len(sends) != maxQuestionMessages {
		t.Fatalf("%d messages, want %d", len(sends), maxQuestionMessages)
	}
	var texts []string
	for _, c := range sends {
		texts = append(texts, c.Params["text"])
	}
	shown := commandOf(texts...)
	if !strings.HasPrefix(cmd, shown) {
		t.Fatal("the shown part is not the command's beginning")
	}
	want := escapeHTML(q.NotShown(len([]rune(cmd)) - len([]rune(shown))))
	if last := texts[len(texts)-1]; !strings.Contains(last, "</pre>\n<b>"+want+"</b>") {
		t.Errorf("last message %q; want the note %q", last[len(last)-400:], want)
	}
}

// TestApprovalPartsNotSentTwice: when Telegram refuses the second part (a 429),
// the retry sends only what is missing.
func TestApprovalPartsNotSentTwice(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	d := qDelivery("100000001", shellApproval(t, longCommand(10000)))
	e.srv.FailAfter("sendMessage", 1, telegramtest.RateLimited(1))
	if _, err := a.PostQuestion(context.Background(), d); err == nil {
		t.Fatal("want the 429")
	}
	if _, err := a.PostQuestion(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range e.srv.Messages(botToken) {
		texts = append(texts, m.Text)
	}
	if got := commandOf(texts...); got != d.Question.Prompt().Body {
		t.Errorf("%d messages show %d characters; want the command once", len(texts), len([]rune(got)))
	}
}
