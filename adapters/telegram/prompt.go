package telegram

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"openbot/core"
)

// QuestionHTML is the last of QuestionMessages: the message that carries the
// buttons, and the decision once resolved.
func (a *Adapter) QuestionHTML(d core.QuestionDelivery, resolved bool) string {
	msgs := a.QuestionMessages(d, resolved)
	return msgs[len(msgs)-1]
}

// QuestionMessages renders a question as Telegram HTML messages, each at most
// MaxMessageLen UTF-16 code units as Telegram counts them (after parsing the
// HTML; the markup around the command is counted whole, to be safe): the bold bot name when another bot speaks
// through this account, the question text, and for an approval the warnings
// (core.Question.Prompt), the tool with its command or arguments in <pre> blocks
// over as many messages as they need (at most maxQuestionMessages; the rest is
// said with core.Question.NotShown) and what the call can reach; the last message
// ends with the decision line (resolved) or, for a free-text ask, a hint to reply.
func (a *Adapter) QuestionMessages(d core.QuestionDelivery, resolved bool) []string {
	q := d.Question
	var head strings.Builder
	head.WriteString(a.namePrefix(d.Sender))
	text := strings.TrimSpace(q.Text)
	if text == "" && q.Kind == core.QuestionApproval {
		text = "May I run this?"
	}
	body := Format(trimUnits(text, maxQuestionText))
	if utf16Len(body) > maxQuestionText {
		body = escapeTrim(PlainText(body), maxQuestionText)
	}
	head.WriteString(body)

	var tail string
	switch {
	case resolved:
		tail = "\n\n<b>" + escapeTrim(decisionLine(q), maxDecisionLine) + "</b>"
	case len(q.Options()) == 0:
		tail = "\n\n<i>Reply to this message to answer.</i>"
	}
	if q.Kind != core.QuestionApproval {
		return []string{head.String() + tail}
	}
	p := q.Prompt()
	for i, w := range p.Warnings {
		sep := "\n"
		if i == 0 {
			sep = "\n\n"
		}
		head.WriteString(sep + "⚠️ <b>" + escapeTrim(w, maxWarningText) + "</b>")
	}
	var footer string
	if p.Reach != "" {
		footer = "\n<i>Reach: " + escapeTrim(p.Reach, maxReachText) + "</i>"
	}
	// Every message keeps room for the footer, the note of what is not shown and
	// the decision line, so whichever is last, it fits once resolved too.
	reserve := utf16Len(footer) + 2*utf16Len(q.NotShown(1<<30)) + maxDecisionLine + len("\n\n<b></b>")
	title := "\n\n<b>" + escapeTrim(p.Tool, 200) + "</b> " + strings.ToLower(p.Label) + ":"
	const partLabel = 24 // " (part 10 of 10)" in <i>
	var msgs, pres []string
	rest := p.Body
	notShown := 0
	for i := 0; i == 0 || rest != ""; i++ {
		if i == maxQuestionMessages {
			notShown = utf8.RuneCountInString(rest)
			break
		}
		fixed := strings.TrimPrefix(title, "\n\n") // a part of its own starts with the tool
		if i == 0 {
			fixed = head.String() + title
		}
		budget := MaxMessageLen - utf16Len(fixed) - partLabel - len("\n<pre></pre>") - reserve
		var piece string
		piece, rest = core.Cut(rest, budget, preSize)
		pre := ""
		if piece != "" || rest == "" {
			pre = "\n<pre>" + escapeHTML(strings.TrimSuffix(piece, "\n")) + "</pre>"
		}
		msgs, pres = append(msgs, fixed), append(pres, pre)
	}
	for i := range msgs {
		if len(msgs) > 1 {
			msgs[i] += fmt.Sprintf(" <i>(part %d of %d)</i>", i+1, len(msgs))
		}
		msgs[i] += pres[i]
	}
	last := len(msgs) - 1
	if notShown > 0 {
		msgs[last] += "\n<b>" + escapeHTML(q.NotShown(notShown)) + "</b>"
	}
	msgs[last] += footer + tail
	return msgs
}

// preSize is how many UTF-16 code units a rune of a command takes in a <pre>
// block as Telegram counts a message's length: after parsing, so an escaped
// character counts once.
func preSize(r rune) int { return max(utf16.RuneLen(r), 1) }
