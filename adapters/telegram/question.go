package telegram

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

var _ core.QuestionAdapter = (*Adapter)(nil)

// Size budgets of a question message, in UTF-16 code units (the unit of
// MaxMessageLen). Every message of a question keeps room for the decision line
// ResolveQuestion appends, so a resolved message is within one message too.
const (
	maxQuestionText = 1500 // the question, after formatting
	maxDecisionLine = 300  // "Approved by …" or a free-text answer, trimmed
	maxButtonText   = 64   // runes of one button label
	maxReachText    = 600  // the tool's reach sentence (core.Question.Reach)
	maxWarningText  = 400  // one warning about the call (core.Question.Warnings)
	maxButtons      = 100  // Telegram's limit on an inline keyboard
	// maxQuestionMessages bounds the messages of one question: the parts of a
	// long command posted first, then the message with the buttons. What does
	// not fit is left out with a line saying how much and where to read it.
	maxQuestionMessages = 6
	// shortChoice is the longest label (runes) that still shares a row with
	// others; longer choices get a row each.
	shortChoice = 16
)

// PostQuestion implements core.QuestionAdapter (DESIGN.md §5
// "Telegram: message with an inline keyboard"). It sends the question's HTML
// messages (QuestionMessages) with sendMessage to the conversation's chat and
// forum topic, the first replying to d.ReplyTo: the asking bot's name in bold when
// this account does not speak as that bot, the question text (trimmed to 1,500
// UTF-16 units), and for an approval the warnings about the call, the shell command
// itself (or the tool's arguments as indented JSON) in <pre> blocks and what the
// call can reach. A command too long for one message is sent in parts, at most
// six messages, what still does not fit left out with a line saying how much and
// where to read it whole. The last message carries the inline keyboard: each of
// Question.Options() is one button whose callback_data is CallbackData(token,
// index), at most 64 bytes whatever the ids and language (Approve and Reject share
// a row; short choices share rows of three; long ones get a row each). A
// free-text ask has no keyboard and says to reply to the message. Parts already
// sent by an earlier, failed attempt for the same outbox entry are not sent
// again. It returns the message_id of the last message. Errors are as for
// Deliver; a malformed ConversationRef or a token CallbackData refuses is
// permanent.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{fmt.Errorf("telegram: post question to %q: %w", d.Conversation, err)}
	}
	kb, err := Keyboard(d.Question)
	if err != nil {
		return "", permanentError{fmt.Errorf("telegram: question %d: %w", d.Question.ID, err)}
	}
	extra := tgbotapi.Params{}
	if kb != nil {
		rm, err := json.Marshal(kb)
		if err != nil {
			return "", permanentError{fmt.Errorf("telegram: question %d keyboard: %w", d.Question.ID, err)}
		}
		extra["reply_markup"] = string(rm)
	}
	replyTo, _ := strconv.ParseInt(d.ReplyTo, 10, 64)
	msgs := a.QuestionMessages(d, false)
	st := sent{}
	if d.Outbox != 0 {
		if st, _ = a.progress.Get(d.Outbox, time.Now()); st.parts >= len(msgs) {
			st = sent{}
		}
	}
	var id string
	for i := st.parts; i < len(msgs); i++ {
		rt, ex := int64(0), tgbotapi.Params(nil)
		if i == 0 {
			rt = replyTo
		}
		if i == len(msgs)-1 {
			ex = extra
		}
		if id, err = a.sendWith(ctx, conv, msgs[i], "HTML", rt, ex); err != nil {
			var de core.DeliveryError
			if d.Outbox != 0 && errors.As(err, &de) && de.Permanent() {
				a.setProgress(d.Outbox, sent{}, false)
			}
			return "", err
		}
		st.parts = i + 1
		if d.Outbox != 0 {
			a.setProgress(d.Outbox, st, i+1 < len(msgs))
		}
	}
	return id, nil
}

// ResolveQuestion implements core.QuestionAdapter (DESIGN.md §5, the decision replaces the buttons): it edits the
// question's last message d.PlatformID with editMessageText to what it showed
// followed by d.Question.Decision() in bold ("Approved by Alice"); earlier parts of
// a long command stay as they are. editMessageText without
// reply_markup removes the inline keyboard, so one call replaces the buttons by the
// decision. It is idempotent: Telegram's "message is not modified" answer is
// success. A PlatformID that is not a message_id is a permanent error; others are
// as for Deliver.
func (a *Adapter) ResolveQuestion(ctx context.Context, d core.QuestionDelivery) error {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return permanentError{fmt.Errorf("telegram: resolve question in %q: %w", d.Conversation, err)}
	}
	id, err := strconv.ParseInt(d.PlatformID, 10, 64)
	if err != nil || id <= 0 {
		return permanentError{fmt.Errorf("telegram: resolve question %d: bad message id %q", d.Question.ID, d.PlatformID)}
	}
	html := a.QuestionHTML(d, true)
	p := tgbotapi.Params{
		"chat_id":    strconv.FormatInt(conv.Chat, 10),
		"message_id": strconv.FormatInt(id, 10),
		"text":       html,
		"parse_mode": "HTML",
	}
	_, err = a.call(ctx, "editMessageText", p, requestTimeout)
	var ae *APIError
	if err != nil && errors.As(err, &ae) && ae.cantParseEntities() {
		a.log.Warn("telegram could not parse our HTML; editing as plain text", "chat", conv.Chat, "err", err)
		delete(p, "parse_mode")
		p["text"] = PlainText(html)
		_, err = a.call(ctx, "editMessageText", p, requestTimeout)
	}
	if err != nil && errors.As(err, &ae) && ae.notModified() {
		return nil // already shows the decision
	}
	return err
}

// notModified reports Telegram's answer to an edit that changes nothing.
func (e *APIError) notModified() bool {
	return e.Code == 400 && strings.Contains(strings.ToLower(e.Description), "message is not modified")
}

// Keyboard returns the inline keyboard of a question (one button per
// Question.Options(), callback_data from CallbackData), or nil for a free-text
// ask. At most 100 buttons are shown. It returns ErrBadCallback when the question's
// token cannot be encoded.
func Keyboard(q core.Question) (*tgbotapi.InlineKeyboardMarkup, error) {
	opts := q.Options()
	if len(opts) == 0 {
		return nil, nil
	}
	if len(opts) > maxButtons {
		opts = opts[:maxButtons]
	}
	var rows [][]tgbotapi.InlineKeyboardButton
	var row []tgbotapi.InlineKeyboardButton
	for i, o := range opts {
		data, err := CallbackData(q.Token, i)
		if err != nil {
			return nil, err
		}
		label := trimRunes(strings.TrimSpace(o), maxButtonText)
		if label == "" {
			label = strconv.Itoa(i + 1)
		}
		long := q.Kind != core.QuestionApproval && len([]rune(label)) > shortChoice
		if len(row) > 0 && (long || len(row) == 3) {
			rows, row = append(rows, row), nil
		}
		row = append(row, tgbotapi.NewInlineKeyboardButtonData(label, data))
		if long {
			rows, row = append(rows, row), nil
		}
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	kb := tgbotapi.NewInlineKeyboardMarkup(rows...)
	return &kb, nil
}

// decisionLine is the decision with a mark: ✅ approved, ❌ rejected or expired,
// 💬 answered.
func decisionLine(q core.Question) string {
	dec := q.Decision()
	switch {
	case dec == "":
		return "Decided"
	case q.Approved():
		return "✅ " + dec
	case q.Kind == core.QuestionApproval || q.Status == core.QuestionExpired:
		return "❌ " + dec
	}
	return "💬 " + dec
}

// namePrefix is the bold "<name>\n" heading of a message from a bot other than the
// one this account speaks as (a "*" account, or a reply routed through it).
func (a *Adapter) namePrefix(s core.Sender) string {
	h := s.Handle
	if h == "" || strings.EqualFold(h, a.bot) {
		return ""
	}
	name := cmp.Or(s.Name, h)
	return "<b>" + escapeHTML(name) + "</b>\n"
}

// escapeTrim escapes s for Telegram HTML and cuts it, at a rune boundary, so that
// the result (with "…" when cut) is at most budget UTF-16 code units.
func escapeTrim(s string, budget int) string {
	if e := escapeHTML(s); utf16Len(e) <= budget {
		return e
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		e := escapeHTML(string(r))
		l := utf16Len(e)
		if n+l > budget-1 {
			break
		}
		b.WriteString(e)
		n += l
	}
	return b.String() + "…"
}

// trimUnits cuts s at a rune boundary to at most limit UTF-16 code units, ending
// in "…" when cut.
func trimUnits(s string, limit int) string {
	if utf16Len(s) <= limit {
		return s
	}
	n := 0
	for i, r := range s {
		l := max(utf16.RuneLen(r), 1)
		if n+l > limit-1 {
			return s[:i] + "…"
		}
		n += l
	}
	return s
}

// trimRunes cuts s to at most n runes, ending in "…" when cut.
func trimRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
