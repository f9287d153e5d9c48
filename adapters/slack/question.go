package slack

import (
	"context"
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
	blockArgs     = "openbot_question_args" // the first code section; the next are "openbot_question_args_<n>"
	blockWarnings = "openbot_question_warnings"
	blockReach    = "openbot_question_reach"
	blockNotShown = "openbot_question_not_shown"
	blockActions  = "openbot_question_actions"
	blockDecision = "openbot_question_decision"
	blockHint     = "openbot_question_hint"

	// maxQuestionText bounds the question text in its section before formatting
	// (Slack allows 3,000 characters in a section's text).
	maxQuestionText = 2400
	// maxCodeText bounds one code section of an approval's command or arguments,
	// fences and part label included (Slack: 3,000 characters a section).
	maxCodeText = 2900
	// maxMessageText bounds all the block text of one message: Slack refuses a
	// message whose blocks add up to much more (msg_blocks_too_long, at about
	// 13,000 characters) even when each block is within its own limit.
	maxMessageText = 11000
	// maxQuestionMessages bounds the messages of one question: the parts of a
	// long command posted first, then the message with the buttons. What does
	// not fit is left out with a line saying how much and where to read it.
	maxQuestionMessages = 3
	// maxReachText bounds the tool's reach sentence (core.Question.Reach).
	maxReachText = 600
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
// §5) with chat.postMessage: a section holding the question (mrkdwn); for an
// approval the warnings about the call, the shell command itself (or the tool's
// arguments as JSON) in code sections of at most 2,900 characters, and what the
// call can reach; then an actions block with one button per Question.Options():
// action_id "openbot_q_<index>", value "<token>:<index>", Approve primary
// (green), Reject danger (red). A command too long for one message is posted in
// parts, each its own message in the thread, the buttons under the last one (at
// most three messages; what still does not fit is left out with a line saying how
// much and where to read it whole). Parts already posted by an earlier, failed
// attempt for the same outbox entry are not posted again. A free-text ask_human
// gets no buttons and a line saying to reply in the thread. The text field
// carries a plain fallback for notifications. A "*" app posts under the asking
// bot's name and icon, as Deliver does. It returns the ts of the message with the
// buttons. Errors are mapped like Deliver's.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", &deliveryError{err: fmt.Errorf("%w: %q", err, d.Conversation), permanent: true}
	}
	msgs := QuestionMessages(d.Question, d.Sender)
	pr, _ := a.progress.Get(d.Outbox, a.clock.Now())
	if pr.n != len(msgs) {
		pr = progress{n: len(msgs)}
	}
	var ts string
	for i := pr.posted; i < len(msgs); i++ {
		fallback := questionFallback(d.Question, d.Sender)
		if i < len(msgs)-1 {
			fallback = fmt.Sprintf("%s (part %d of %d)", fallback, i+1, len(msgs))
		}
		opts := append([]slack.MsgOption{
			slack.MsgOptionText(fallback, false),
			slack.MsgOptionBlocks(msgs[i]...),
			slack.MsgOptionDisableLinkUnfurl(),
			slack.MsgOptionDisableMediaUnfurl(),
		}, a.senderOptions(d.Sender)...)
		if conv.ThreadTS != "" {
			opts = append(opts, slack.MsgOptionTS(conv.ThreadTS))
		}
		cctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, ts, err = a.api.PostMessageContext(cctx, conv.Channel, opts...)
		cancel()
		if err != nil {
			if d.Outbox != 0 && pr.posted > 0 {
				a.progress.Put(d.Outbox, pr, a.clock.Now())
			}
			a.log.Warn("slack question post failed", "channel", conv.Channel, "question", d.Question.ID, "part", i+1, "of", len(msgs), "err", err)
			return "", mapError(err)
		}
		a.sent()
		pr.posted = i + 1
	}
	a.progress.Delete(d.Outbox)
	return ts, nil
}

// ResolveQuestion replaces a posted question's buttons with its decision
// (core.QuestionAdapter; DESIGN.md §5): chat.update of the message d.PlatformID
// (the question's last message) with the same blocks and, instead of the actions
// block, a context line with d.Question.Decision() ("Approved by Alice"). Earlier
// parts of a long command stay as they are. Updating twice shows the same
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
	a.sent()
	return nil
}

// QuestionMessages is the Block Kit of a pending question, one slice of blocks
// per message: the last message ends with the buttons (or, for a free-text
// question, a hint to reply in the thread); the ones before it carry the first
// parts of a command too long for one message. Pure.
func QuestionMessages(q core.Question, from core.Sender) [][]slack.Block {
	msgs := questionPages(q, from)
	last := len(msgs) - 1
	msgs[last] = append(msgs[last], questionActions(q))
	return msgs
}

// questionActions is the actions block of a question's buttons, or the hint to
// reply in the thread when it has none.
func questionActions(q core.Question) slack.Block {
	opts := q.Options()
	if len(opts) == 0 {
		return slack.NewContextBlock(blockHint,
			slack.NewTextBlockObject(slack.MarkdownType, "Reply in this thread to answer.", false, false))
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
	return slack.NewActionBlock(blockActions, buttons...)
}

// ResolvedBlocks is the question's last message (QuestionMessages) with the
// buttons (or hint) replaced by a context line showing q.Decision(). Pure.
func ResolvedBlocks(q core.Question, from core.Sender) []slack.Block {
	msgs := questionPages(q, from)
	return append(msgs[len(msgs)-1], slack.NewContextBlock(blockDecision,
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
		if n := len(q.Warnings); n > 0 {
			s += fmt.Sprintf(" (⚠ %d warning%s)", n, map[bool]string{true: "s"}[n > 1])
		}
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
