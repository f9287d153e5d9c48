package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// DefaultStreamInterval is the least time between two edits of a streamed reply
// in one conversation: Slack allows chat.update about once per second per
// message (Web API tier 3, fixtures API_NOTES.md "Limits").
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
// Markdown so far is formatted and split like Deliver's; the first part is posted
// with chat.postMessage, later calls edit changed parts with chat.update, post
// parts the text grew into and delete surplus ones with chat.delete. Empty text
// deletes every streamed message. Errors are core.DeliveryErrors (mapError).
func (a *Adapter) Stream(ctx context.Context, s core.StreamDelivery) ([]string, error) {
	conv, err := ParseConversation(s.Conversation)
	if err != nil {
		return s.Posted, &deliveryError{err: fmt.Errorf("%w: %q", err, s.Conversation), permanent: true}
	}
	if strings.TrimSpace(s.Text) == "" {
		return nil, a.deleteAll(ctx, conv, s.Posted)
	}
	chunks := Split(Format(s.Text), MaxChunk)
	var shown []string
	if s.Shown != "" {
		shown = Split(Format(s.Shown), MaxChunk)
	}
	ids := append([]string(nil), s.Posted...)
	for i, c := range chunks {
		if i < len(ids) {
			if i < len(shown) && shown[i] == c {
				continue
			}
			if err := a.update(ctx, conv, ids[i], c); err != nil {
				return ids, err
			}
			continue
		}
		ts, err := a.post(ctx, conv, c, s.Sender)
		if err != nil {
			return ids, err
		}
		ids = append(ids, ts)
	}
	if len(ids) > len(chunks) {
		if err := a.deleteAll(ctx, conv, ids[len(chunks):]); err != nil {
			return ids, err
		}
		ids = ids[:len(chunks)]
	}
	return ids, nil
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (Delivery.Streamed): each part edits the streamed message at its place (or is
// posted when the text outgrew them, or when Slack no longer has that message),
// surplus streamed messages are deleted. Parts done by an earlier, failed
// attempt for the same outbox entry are not done again, so a 429 neither
// duplicates nor truncates the answer. It returns the first message's ts.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery) (string, error) {
	chunks := Split(Format(d.Text), MaxChunk)
	key := uint64(d.Outbox)
	pr := a.progress.get(key)
	if pr.n != len(chunks) {
		pr = progress{n: len(chunks), firstTS: d.Streamed[0]}
	}
	for i := pr.posted; i < len(chunks); i++ {
		var err error
		if i < len(d.Streamed) {
			err = a.update(ctx, conv, d.Streamed[i], chunks[i])
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && (se.Err == "message_not_found" || se.Err == "cant_update_message" || se.Err == "edit_window_closed") {
				var ts string
				if ts, err = a.post(ctx, conv, chunks[i], d.Sender); err == nil && i == 0 {
					pr.firstTS = ts
				}
			}
		} else {
			_, err = a.post(ctx, conv, chunks[i], d.Sender)
		}
		if err != nil {
			if d.Outbox != 0 {
				a.progress.set(key, pr)
			}
			a.log.Warn("slack streamed reply failed", "channel", conv.Channel, "chunk", i+1, "of", len(chunks), "err", err)
			return "", mapError(err)
		}
		pr.posted = i + 1
	}
	if len(d.Streamed) > len(chunks) {
		if err := a.deleteAll(ctx, conv, d.Streamed[len(chunks):]); err != nil {
			a.log.Warn("slack: deleting surplus streamed messages failed", "channel", conv.Channel, "err", err)
		}
	}
	a.progress.done(key)
	return pr.firstTS, nil
}

// post posts one part into the conversation's thread, as Deliver does.
func (a *Adapter) post(ctx context.Context, conv Conversation, text string, sender core.Sender) (string, error) {
	opts := append([]slack.MsgOption{
		slack.MsgOptionText(text, false),
		slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl(),
	}, a.senderOptions(sender)...)
	if conv.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(conv.ThreadTS))
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, ts, err := a.api.PostMessageContext(cctx, conv.Channel, opts...)
	if err != nil {
		return "", mapError(err)
	}
	return ts, nil
}

// update replaces the text of message ts with chat.update.
func (a *Adapter) update(ctx context.Context, conv Conversation, ts, text string) error {
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, _, _, err := a.api.UpdateMessageContext(cctx, conv.Channel, ts, slack.MsgOptionText(text, false))
	if err != nil {
		return mapError(err)
	}
	return nil
}

// deleteAll deletes messages with chat.delete; one already gone counts as deleted.
func (a *Adapter) deleteAll(ctx context.Context, conv Conversation, ids []string) error {
	var first error
	for _, ts := range ids {
		cctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, _, err := a.api.DeleteMessageContext(cctx, conv.Channel, ts)
		cancel()
		var se slack.SlackErrorResponse
		if err != nil && !(errors.As(err, &se) && se.Err == "message_not_found") && first == nil {
			first = mapError(err)
		}
	}
	return first
}
