package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/adapters/internal/stream"
	"openbot/core"
)

// DefaultStreamInterval is the least time between two edits of a streamed reply
// in one chat: Telegram allows about one message per second per chat, edits
// included, and answers more with 429 retry_after.
const DefaultStreamInterval = time.Second

var _ core.Streamer = (*Adapter)(nil)

// StreamInterval implements core.Streamer: 0 when Options.Streaming is off.
func (a *Adapter) StreamInterval() time.Duration { return a.pace.StreamInterval() }

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
	replyTo, _ := strconv.ParseInt(s.ReplyTo, 10, 64)
	return stream.Update(ctx, s, func(text string) []string { return a.parts(s.Sender, text) }, a.streamOps(conv, replyTo))
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

// streamOps sends parts as HTML (the first as a reply to replyTo), edits with
// editMessageText and deletes with deleteMessage; a message Telegram no longer
// has is gone.
func (a *Adapter) streamOps(conv Conversation, replyTo int64) stream.Ops {
	return stream.Ops{
		Edit: func(ctx context.Context, id, html string) error { return a.edit(ctx, conv, id, html) },
		Post: func(ctx context.Context, i int, html string) (string, error) {
			rt := int64(0)
			if i == 0 {
				rt = replyTo
			}
			return a.send(ctx, conv, html, "HTML", rt)
		},
		Delete: func(ctx context.Context, ids []string) error { return a.deleteAll(ctx, conv, ids) },
		Gone: func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Code == 400 && strings.Contains(strings.ToLower(ae.Description), "message to edit not found")
		},
	}
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (core.Delivery.Streamed, stream.Final). Parts done by an earlier, failed
// attempt for the same outbox entry are not done again. It returns the first
// message's id.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery, parts []string) (string, error) {
	f := stream.Final{Parts: parts, Streamed: d.Streamed}
	if st, ok := a.progress.Get(d.Outbox, time.Now()); ok {
		f.Done, f.First = st.parts, st.first
	}
	if err := f.Finish(ctx, a.streamOps(conv, 0), a.log.With("chat", conv.Chat)); err != nil {
		var de core.DeliveryError
		a.setProgress(d.Outbox, sent{parts: f.Done, first: f.First}, !(errors.As(err, &de) && de.Permanent()))
		return "", err
	}
	a.setProgress(d.Outbox, sent{}, false)
	return f.First, nil
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
