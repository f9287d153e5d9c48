package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// DefaultStreamInterval is the least time between two edits of a streamed reply
// in one chat: Telegram allows about one message per second per chat, edits
// included, and answers more with 429 retry_after.
const DefaultStreamInterval = time.Second

var _ core.Streamer = (*Adapter)(nil)

// StreamInterval implements core.Streamer: 0 when Options.Streaming is off.
func (a *Adapter) StreamInterval() time.Duration {
	if !a.streaming {
		return 0
	}
	return a.streamEvery
}

// Stream shows a reply while it is written (core.Streamer, DESIGN.md §6): the
// Markdown so far is rendered and split like Deliver's; the first part is sent
// (as a reply to s.ReplyTo), later calls edit changed parts with editMessageText,
// send parts the text grew into and delete surplus ones (deleteMessage). Empty
// text deletes every streamed message. Errors are as for Deliver.
func (a *Adapter) Stream(ctx context.Context, s core.StreamDelivery) ([]string, error) {
	conv, err := ParseConversation(s.Conversation)
	if err != nil {
		return s.Posted, permanentError{fmt.Errorf("telegram: stream to %q: %w", s.Conversation, err)}
	}
	if strings.TrimSpace(s.Text) == "" {
		return nil, a.deleteAll(ctx, conv, s.Posted)
	}
	parts := a.parts(s.Sender, s.Text)
	var shown []string
	if s.Shown != "" {
		shown = a.parts(s.Sender, s.Shown)
	}
	replyTo, _ := strconv.ParseInt(s.ReplyTo, 10, 64)
	ids := append([]string(nil), s.Posted...)
	for i, p := range parts {
		if i < len(ids) {
			if i < len(shown) && shown[i] == p {
				continue
			}
			if err := a.edit(ctx, conv, ids[i], p); err != nil {
				return ids, err
			}
			continue
		}
		rt := int64(0)
		if i == 0 {
			rt = replyTo
		}
		id, err := a.send(ctx, conv, p, "HTML", rt)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	if len(ids) > len(parts) {
		if err := a.deleteAll(ctx, conv, ids[len(parts):]); err != nil {
			return ids, err
		}
		ids = ids[:len(parts)]
	}
	return ids, nil
}

// parts renders text as Deliver does and splits it into visible messages.
func (a *Adapter) parts(sender core.Sender, text string) []string {
	var out []string
	for _, p := range Split(a.render(core.Delivery{Sender: sender, Text: text}), MaxMessageLen) {
		if strings.TrimSpace(PlainText(p)) != "" {
			out = append(out, p)
		}
	}
	return out
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (core.Delivery.Streamed): each part edits the streamed message at its place (or
// is sent when the text outgrew them, or when Telegram no longer has that
// message), surplus streamed messages are deleted. Parts done by an earlier,
// failed attempt for the same outbox entry are not done again, so a 429 neither
// duplicates nor truncates the answer. It returns the first message's id.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery, parts []string) (string, error) {
	st, ok := a.progress.Get(d.Outbox, time.Now())
	if !ok {
		st = sent{first: d.Streamed[0]}
	}
	for i := st.parts; i < len(parts); i++ {
		var err error
		if i < len(d.Streamed) {
			err = a.edit(ctx, conv, d.Streamed[i], parts[i])
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == 400 && strings.Contains(strings.ToLower(ae.Description), "message to edit not found") {
				var id string
				if id, err = a.send(ctx, conv, parts[i], "HTML", 0); err == nil && i == 0 {
					st.first = id
				}
			}
		} else {
			_, err = a.send(ctx, conv, parts[i], "HTML", 0)
		}
		if err != nil {
			var de core.DeliveryError
			a.setProgress(d.Outbox, st, !(errors.As(err, &de) && de.Permanent()))
			return "", err
		}
		st.parts = i + 1
	}
	if len(d.Streamed) > len(parts) {
		if err := a.deleteAll(ctx, conv, d.Streamed[len(parts):]); err != nil {
			a.log.Warn("telegram: deleting surplus streamed messages failed", "chat", conv.Chat, "err", err)
		}
	}
	a.setProgress(d.Outbox, sent{}, false)
	return st.first, nil
}

// edit replaces the text of message id with editMessageText; "message is not
// modified" is success, HTML Telegram cannot parse is sent once as plain text.
func (a *Adapter) edit(ctx context.Context, conv Conversation, id, html string) error {
	mid, err := strconv.ParseInt(id, 10, 64)
	if err != nil || mid <= 0 {
		return permanentError{fmt.Errorf("telegram: edit: bad message id %q", id)}
	}
	p := tgbotapi.Params{
		"chat_id":    strconv.FormatInt(conv.Chat, 10),
		"message_id": strconv.FormatInt(mid, 10),
		"text":       html,
		"parse_mode": "HTML",
	}
	_, err = a.call(ctx, "editMessageText", p, requestTimeout)
	var ae *APIError
	if err != nil && errors.As(err, &ae) && ae.cantParseEntities() {
		delete(p, "parse_mode")
		p["text"] = PlainText(html)
		_, err = a.call(ctx, "editMessageText", p, requestTimeout)
	}
	if err != nil && errors.As(err, &ae) && ae.notModified() {
		return nil
	}
	return err
}

// deleteAll deletes messages with deleteMessage; one already gone counts as deleted.
func (a *Adapter) deleteAll(ctx context.Context, conv Conversation, ids []string) error {
	var first error
	for _, id := range ids {
		p := tgbotapi.Params{"chat_id": strconv.FormatInt(conv.Chat, 10), "message_id": id}
		_, err := a.call(ctx, "deleteMessage", p, requestTimeout)
		var ae *APIError
		if err != nil && !(errors.As(err, &ae) && ae.Code == 400 && strings.Contains(strings.ToLower(ae.Description), "not found")) && first == nil {
			first = err
		}
	}
	return first
}
