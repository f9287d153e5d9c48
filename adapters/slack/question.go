package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"openbot/core"
)

// Block Kit layout of a question (DESIGN.md §5). The ids are part of
// the wire contract with Slack's block_actions payloads, so they never change.
const (
	// ActionPrefix starts the action_id of every question button: "openbot_q_<index>",
	// the index into core.Question.Options(). The button's value is "<token>:<index>".
	ActionPrefix = "openbot_q_"

	blockText     = "openbot_question_text"
	blockArgs     = "openbot_question_args"
	blockActions  = "openbot_question_actions"
	blockDecision = "openbot_question_decision"
	blockHint     = "openbot_question_hint"

	// maxQuestionText bounds the question text in its section before formatting
	// (Slack allows 3,000 characters in a section's text).
	maxQuestionText = 2400
	// maxArgsText bounds the tool arguments shown in the code block; the rest is
	// cut with a note saying how much was left out.
	maxArgsText = 1500
	// maxReachText bounds the tool's reach sentence (core.Question.Reach).
	maxReachText = 300
	// maxButtonText is Slack's limit for a button label.
	maxButtonText = 75
	// maxButtons is Slack's limit of elements in one actions block.
	maxButtons = 25
	// maxFallback bounds the notification text.
	maxFallback = 300
)

var _ core.QuestionAdapter = (*Adapter)(nil)

// ErrNotPosted is returned (as a permanent core.DeliveryError) by ResolveQuestion
// when the question has no Slack message id to update.
var ErrNotPosted = errors.New("slack: question has no posted message to update")

// PostQuestion shows a question in its Slack thread (core.QuestionAdapter; DESIGN.md
// §5): chat.postMessage with a section holding the question (mrkdwn), for an
// approval a code block with the tool's arguments (at most 1,500 characters, the
// rest cut with a note), and an actions block with one button per
// Question.Options(): action_id "openbot_q_<index>", value "<token>:<index>", Approve
// primary (green), Reject danger (red). A free-text ask_human gets no buttons and a
// line saying to reply in the thread. The text field carries a plain fallback for
// notifications. A "*" app posts under the asking bot's name and icon, as Deliver
// does. It returns the message ts. Errors are mapped like Deliver's.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", &deliveryError{err: fmt.Errorf("%w: %q", err, d.Conversation), permanent: true}
	}
	opts := append([]slack.MsgOption{
		slack.MsgOptionText(questionFallback(d.Question, d.Sender), false),
		slack.MsgOptionBlocks(QuestionBlocks(d.Question, d.Sender)...),
		slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl(),
	}, a.senderOptions(d.Sender)...)
	if conv.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(conv.ThreadTS))
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, ts, err := a.api.PostMessageContext(cctx, conv.Channel, opts...)
	if err != nil {
		a.log.Warn("slack question post failed", "channel", conv.Channel, "question", d.Question.ID, "err", err)
		return "", mapError(err)
	}
	return ts, nil
}

// ResolveQuestion replaces a posted question's buttons with its decision
// (core.QuestionAdapter; DESIGN.md §5): chat.update of the message d.PlatformID
// with the same question blocks and, instead of the actions block, a context line
// with d.Question.Decision() ("Approved by Alice"). Updating twice shows the same
// thing, so it is idempotent. Errors are mapped like Deliver's; a delivery without
// a PlatformID is ErrNotPosted, permanent.
func (a *Adapter) ResolveQuestion(ctx context.Context, d core.QuestionDelivery) error {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return &deliveryError{err: fmt.Errorf("%w: %q", err, d.Conversation), permanent: true}
	}
	if d.PlatformID == "" {
		return &deliveryError{err: ErrNotPosted, permanent: true}
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, _, _, err = a.api.UpdateMessageContext(cctx, conv.Channel, d.PlatformID,
		slack.MsgOptionText(resolvedFallback(d.Question, d.Sender), false),
		slack.MsgOptionBlocks(ResolvedBlocks(d.Question, d.Sender)...),
	)
	if err != nil {
		a.log.Warn("slack question update failed", "channel", conv.Channel, "ts", d.PlatformID, "question", d.Question.ID, "err", err)
		return mapError(err)
	}
	return nil
}

// QuestionBlocks is the Block Kit of a pending question: its text section, for an
// approval the tool's arguments in a code block, and the buttons (or, for a
// free-text question, a hint to reply in the thread). Pure.
func QuestionBlocks(q core.Question, from core.Sender) []slack.Block {
	blocks := questionBody(q, from)
	opts := q.Options()
	if len(opts) == 0 {
		return append(blocks, slack.NewContextBlock(blockHint,
			slack.NewTextBlockObject(slack.MarkdownType, "Reply in this thread to answer.", false, false)))
	}
	var buttons []slack.BlockElement
	for i, o := range opts {
		if i == maxButtons {
			break
		}
		label := truncate(strings.TrimSpace(o), maxButtonText)
		if label == "" {
			label = strconv.Itoa(i + 1)
		}
		b := slack.NewButtonBlockElement(ActionPrefix+strconv.Itoa(i), ButtonValue(q.Token, i),
			slack.NewTextBlockObject(slack.PlainTextType, label, false, false))
		if q.Kind == core.QuestionApproval {
			switch i {
			case core.ChoiceApprove:
				b = b.WithStyle(slack.StylePrimary)
			case core.ChoiceReject:
				b = b.WithStyle(slack.StyleDanger)
			}
		}
		buttons = append(buttons, b)
	}
	return append(blocks, slack.NewActionBlock(blockActions, buttons...))
}

// ResolvedBlocks is QuestionBlocks with the buttons (or hint) replaced by a context
// line showing q.Decision(). Pure.
func ResolvedBlocks(q core.Question, from core.Sender) []slack.Block {
	return append(questionBody(q, from), slack.NewContextBlock(blockDecision,
		slack.NewTextBlockObject(slack.MarkdownType, decisionLine(q), false, false)))
}

// ButtonValue is a question button's value, "<token>:<index>" (DESIGN.md §5: a
// short opaque token, never the payload); ParseButton reverses it.
func ButtonValue(token string, index int) string { return token + ":" + strconv.Itoa(index) }

// ParseButton decodes a block action of a question button: action_id
// "openbot_q_<index>" and value "<token>:<index>" with the same index. ok is false
// for any other action or a malformed or inconsistent one.
func ParseButton(actionID, value string) (token string, index int, ok bool) {
	idx, found := strings.CutPrefix(actionID, ActionPrefix)
	if !found {
		return "", 0, false
	}
	token, vidx, found := strings.Cut(value, ":")
	if !found || token == "" || len(token) > 64 || vidx != idx {
		return "", 0, false
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || n > 1000 || strconv.Itoa(n) != idx {
		return "", 0, false
	}
	return token, n, true
}

// questionBody is the part of a question that stays when it is resolved: the
// question's text (the bot's words, formatted to mrkdwn; a generated line when it
// is empty) and, for an approval, the tool's arguments in a code block and what
// the tool can reach.
func questionBody(q core.Question, from core.Sender) []slack.Block {
	head := formatBounded(q.Text)
	if strings.TrimSpace(q.Text) == "" {
		if q.Kind == core.QuestionApproval {
			head = "*" + escapeText(senderName(from)) + "* asks for approval to run `" + escapeText(q.Tool) + "`"
		} else {
			head = "*" + escapeText(senderName(from)) + "* has a question."
		}
	}
	blocks := []slack.Block{slack.NewSectionBlock(
		slack.NewTextBlockObject(slack.MarkdownType, head, false, false), nil, nil, slack.SectionBlockOptionBlockID(blockText))}
	if q.Kind == core.QuestionApproval {
		code := "`" + escapeText(q.Tool) + "`\n```\n" + ArgsText(q.Args, maxArgsText) + "\n```"
		if r := strings.TrimSpace(q.Reach); r != "" {
			code += "\n*Reach:* " + escapeText(truncate(r, maxReachText))
		}
		blocks = append(blocks, slack.NewSectionBlock(
			slack.NewTextBlockObject(slack.MarkdownType, code, false, false),
			nil, nil, slack.SectionBlockOptionBlockID(blockArgs)))
	}
	return blocks
}

// ArgsText renders tool arguments for a code block: indented JSON (or the raw text
// when it is not JSON) with Go's \u003c, \u003e and \u0026 shown as the characters
// they stand for, then &, < and > escaped for Slack, no run of three backticks left to end
// the block early, cut after max characters with a note of how many were left out.
// Pure.
func ArgsText(args json.RawMessage, max int) string {
	s := strings.TrimSpace(core.Question{Args: args}.PrettyArgs())
	if s == "" {
		s = "{}"
	}
	if n := utf8.RuneCountInString(s); n > max {
		r := []rune(s)
		s = string(r[:max]) + fmt.Sprintf("\n… (%d more characters)", n-max)
	}
	s = escapeText(s)
	for strings.Contains(s, "```") {
		s = strings.ReplaceAll(s, "```", "`\u200b``")
	}
	return s
}

func decisionLine(q core.Question) string {
	d := q.Decision()
	switch {
	case d == "":
		return "Pending"
	case q.Status == core.QuestionExpired:
		return ":hourglass: " + escapeText(d)
	case q.Kind == core.QuestionApproval && q.Choice == core.ChoiceApprove:
		return ":white_check_mark: " + escapeText(d)
	case q.Kind == core.QuestionApproval:
		return ":x: " + escapeText(d)
	}
	return ":speech_balloon: " + escapeText(d)
}

func senderName(s core.Sender) string {
	switch {
	case s.Name != "":
		return s.Name
	case s.Handle != "":
		return s.Handle
	}
	return "openbot"
}

// questionFallback is the plain text Slack shows in notifications.
func questionFallback(q core.Question, from core.Sender) string {
	var s string
	if q.Kind == core.QuestionApproval {
		s = senderName(from) + " asks for approval to run " + q.Tool
	} else {
		s = senderName(from) + " asks: " + strings.TrimSpace(q.Text)
	}
	return escapeText(truncate(s, maxFallback))
}

func resolvedFallback(q core.Question, from core.Sender) string {
	return escapeText(truncate(questionFallbackPlain(q, from), maxFallback-60) + ": " + q.Decision())
}

func questionFallbackPlain(q core.Question, from core.Sender) string {
	if q.Kind == core.QuestionApproval {
		return senderName(from) + " asked to run " + q.Tool
	}
	return senderName(from) + " asked: " + strings.TrimSpace(q.Text)
}

// formatBounded formats a question's Markdown text for a section, cut so the
// section stays within Slack's 3,000 characters even after escaping.
func formatBounded(t string) string {
	return truncate(Format(truncate(strings.TrimSpace(t), maxQuestionText)), maxQuestionText+300)
}

// truncate cuts s to at most max runes, ending in "…" when cut.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
