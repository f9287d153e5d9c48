package feishu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"openbot/core"
)

// DefaultStreamInterval is the least time between two updates of a streamed
// reply in one conversation. Feishu allows 5 card updates per second per
// message and 50 per second per app; twice a second leaves room for other chats.
const DefaultStreamInterval = 500 * time.Millisecond

// CodeMessageGone is Feishu's answer for a message that was recalled or deleted.
const CodeMessageGone = 230011

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
// as a card where Deliver would put it, later calls update changed cards (PATCH,
// the card's update_multi is set), send parts the text grew into and recall
// surplus ones (DELETE). Empty text recalls every streamed message. Errors are
// *APIError as for Deliver.
func (a *Adapter) Stream(ctx context.Context, s core.StreamDelivery) ([]string, error) {
	conv, err := ParseConversation(s.Conversation)
	if err != nil {
		return s.Posted, permanentError{err}
	}
	if strings.TrimSpace(s.Text) == "" {
		return nil, a.recallAll(ctx, s.Posted)
	}
	chunks := a.chunks(s.Sender, s.Text)
	var shown []string
	if s.Shown != "" {
		shown = a.chunks(s.Sender, s.Shown)
	}
	ids := append([]string(nil), s.Posted...)
	for i, c := range chunks {
		if i < len(ids) {
			if i < len(shown) && shown[i] == c {
				continue
			}
			if err := a.api.patchCard(ctx, ids[i], Card(c)); err != nil {
				return ids, err
			}
			continue
		}
		id, err := a.send(ctx, conv, s.ReplyTo, c, "")
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	if len(ids) > len(chunks) {
		if err := a.recallAll(ctx, ids[len(chunks):]); err != nil {
			return ids, err
		}
		ids = ids[:len(chunks)]
	}
	return ids, nil
}

// chunks renders text as Deliver does (the bot's name on top when this app does
// not speak as it) and splits it.
func (a *Adapter) chunks(sender core.Sender, text string) []string {
	if sender.Handle != "" && (a.bot == "*" || sender.Handle != a.bot) {
		name := sender.Name
		if name == "" {
			name = sender.Handle
		}
		text = "**" + name + "**\n" + text
	}
	return Split(Format(text), MaxChunk)
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (core.Delivery.Streamed): each part updates the streamed card at its place (or
// is sent when the text outgrew them, or when that message was recalled),
// surplus streamed messages are recalled. Card updates are idempotent and sent
// parts carry the outbox entry's uuid, so a retry after a 429 neither duplicates
// nor truncates the answer. It returns the first message's id.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery) (string, error) {
	chunks := a.chunks(d.Sender, d.Text)
	first := d.Streamed[0]
	for i, c := range chunks {
		uuid := fmt.Sprintf("openbot-%d-%d-%d", d.Outbox, d.Message, i)
		if i < len(d.Streamed) {
			err := a.api.patchCard(ctx, d.Streamed[i], Card(c))
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == CodeMessageGone {
				var id string
				if id, err = a.send(ctx, conv, d.ReplyTo, c, uuid); err == nil && i == 0 {
					first = id
				}
			}
			if err != nil {
				return "", err
			}
			continue
		}
		if _, err := a.send(ctx, conv, d.ReplyTo, c, uuid); err != nil {
			return "", err
		}
	}
	if len(d.Streamed) > len(chunks) {
		if err := a.recallAll(ctx, d.Streamed[len(chunks):]); err != nil {
			a.log.Warn("feishu: recalling surplus streamed messages failed", "err", err)
		}
	}
	return first, nil
}

// recallAll recalls messages this app sent; one already gone counts as recalled.
func (a *Adapter) recallAll(ctx context.Context, ids []string) error {
	var first error
	for _, id := range ids {
		err := a.api.deleteMessage(ctx, id)
		var ae *APIError
		if err != nil && !(errors.As(err, &ae) && ae.Code == CodeMessageGone) && first == nil {
			first = err
		}
	}
	return first
}
