package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// sent records how many parts of a split outbox entry reached Telegram, so a retry
// after a failure in a later part (a 429, say) does not post the earlier ones twice.
type sent struct {
	parts int
	first string // message_id of the first part
}

// maxProgress bounds the progress cache; entries are removed on success or
// permanent failure, so it only fills if the lanes give up on many half-sent
// entries, and then the least recently used is forgotten first.
const maxProgress = 1024

// permanentError is a core.DeliveryError that is never retried.
type permanentError struct{ error }

func (permanentError) Permanent() bool           { return true }
func (permanentError) RetryAfter() time.Duration { return 0 }
func (e permanentError) Unwrap() error           { return e.error }
func (e permanentError) Error() string           { return e.error.Error() }

// Deliver posts one outbox entry (core.Adapter; DESIGN.md §4): the Markdown is
// converted to Telegram HTML, prefixed with the speaking bot's name in bold when this
// account does not speak as that bot (a "*" account, or another bot's reply routed
// through this account), split at 4,096 UTF-16 code units, and sent with sendMessage
// to the conversation's chat and forum topic (message_thread_id), the first part as
// a reply to d.ReplyTo (reply_parameters, allow_sending_without_reply). A part that
// Telegram cannot parse ("can't parse entities") is resent once as plain text. It
// returns the first part's message_id. Errors are *APIError (429 carries
// RetryAfter; 400 chat not found and 403 blocked are Permanent) or transport errors;
// a malformed ConversationRef is permanent. A reply that was streamed (d.Streamed)
// edits the streamed messages instead (deliverStreamed). Calls for one conversation never overlap
// (core's lanes); calls for different conversations may run concurrently.
func (a *Adapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{fmt.Errorf("telegram: deliver to %q: %w", d.Conversation, err)}
	}
	var parts []string
	for _, p := range Split(a.render(d), MaxMessageLen) {
		if strings.TrimSpace(PlainText(p)) != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "", nil // nothing visible to post
	}
	if len(d.Streamed) > 0 {
		return a.deliverStreamed(ctx, conv, d, parts)
	}
	replyTo, _ := strconv.ParseInt(d.ReplyTo, 10, 64)

	st, _ := a.progress.Get(d.Outbox, time.Now())
	for i := st.parts; i < len(parts); i++ {
		rt := int64(0)
		if i == 0 {
			rt = replyTo
		}
		id, err := a.send(ctx, conv, parts[i], "HTML", rt)
		if err != nil {
			var de core.DeliveryError
			if errors.As(err, &de) && de.Permanent() {
				a.setProgress(d.Outbox, sent{}, false)
			}
			return "", err
		}
		if i == 0 {
			st.first = id
		}
		st.parts = i + 1
		a.setProgress(d.Outbox, st, i+1 < len(parts))
	}
	return st.first, nil
}

func (a *Adapter) setProgress(id core.OutboxID, st sent, keep bool) {
	if !keep {
		a.progress.Delete(id)
		return
	}
	a.progress.Put(id, st, time.Now())
}

var _ core.MessageKeyer = (*Adapter)(nil)

// MessageKey is the platform identity of a message Deliver posted (the DedupKey
// format), so a reply to it joins its thread (core.Inbound.ReplyToKey).
func (a *Adapter) MessageKey(ref core.ConversationRef, platformID string) string {
	conv, err := ParseConversation(ref)
	id, perr := strconv.ParseInt(platformID, 10, 64)
	me, known := a.Self()
	if err != nil || perr != nil || !known {
		return ""
	}
	return DedupKey(me.ID, conv.Chat, id)
}

// render returns the Telegram HTML of a delivery, with the bold name prefix when
// another bot speaks through this account.
func (a *Adapter) render(d core.Delivery) string {
	return a.namePrefix(d.Sender) + Format(d.Text)
}

// send posts one message and returns its message_id. parseMode "" sends plain
// text; with "HTML", a "can't parse entities" answer is followed by exactly one
// plain-text resend of the same part.
func (a *Adapter) send(ctx context.Context, conv Conversation, text, parseMode string, replyTo int64) (string, error) {
	return a.sendWith(ctx, conv, text, parseMode, replyTo, nil)
}

// sendWith is send with extra sendMessage parameters (reply_markup).
func (a *Adapter) sendWith(ctx context.Context, conv Conversation, text, parseMode string, replyTo int64, extra tgbotapi.Params) (string, error) {
	p := tgbotapi.Params{
		"chat_id": strconv.FormatInt(conv.Chat, 10),
		"text":    text,
	}
	for k, v := range extra {
		p[k] = v
	}
	p.AddNonEmpty("parse_mode", parseMode)
	p.AddNonZero64("message_thread_id", conv.Topic)
	if replyTo != 0 {
		rp, _ := json.Marshal(replyParameters{MessageID: replyTo, AllowSendingWithoutReply: true})
		p["reply_parameters"] = string(rp)
	}
	res, err := a.call(ctx, "sendMessage", p, requestTimeout)
	var ae *APIError
	if err != nil && parseMode != "" && errors.As(err, &ae) && ae.cantParseEntities() {
		a.log.Warn("telegram could not parse our HTML; resending as plain text", "chat", conv.Chat, "err", err)
		delete(p, "parse_mode")
		p["text"] = PlainText(text)
		res, err = a.call(ctx, "sendMessage", p, requestTimeout)
	}
	if err != nil {
		return "", err
	}
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	if err := json.Unmarshal(res, &m); err != nil {
		return "", fmt.Errorf("telegram sendMessage: decoding result: %w", err)
	}
	return strconv.FormatInt(m.MessageID, 10), nil
}
