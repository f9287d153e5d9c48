package slack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"openbot/adapters/internal/stream"
	"openbot/core"
)

// DefaultStreamInterval is the least time between two edits of a streamed reply
// in one conversation: Slack allows chat.update about once per second per
// message (Web API tier 3, fixtures API_NOTES.md "Limits").
const DefaultStreamInterval = time.Second

var _ core.Streamer = (*Adapter)(nil)

// StreamInterval implements core.Streamer: 0 when Options.Streaming is off.
func (a *Adapter) StreamInterval() time.Duration { return a.pace.StreamInterval() }

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
	return stream.Update(ctx, s, chunks, a.streamOps(conv, s.Sender))
}

// chunks formats and splits Markdown as Deliver does.
func chunks(text string) []string { return Split(Format(text), MaxChunk) }

// streamOps posts into conv's thread as sender, edits with chat.update and
// deletes with chat.delete; a message Slack no longer has or lets edit is gone.
func (a *Adapter) streamOps(conv Conversation, sender core.Sender) stream.Ops {
	return stream.Ops{
		Edit:   func(ctx context.Context, ts, text string) error { return a.update(ctx, conv, ts, text) },
		Post:   func(ctx context.Context, _ int, text string) (string, error) { return a.post(ctx, conv, text, sender) },
		Delete: func(ctx context.Context, ids []string) error { return a.deleteAll(ctx, conv, ids) },
		Gone: func(err error) bool {
			var se slack.SlackErrorResponse
			return errors.As(err, &se) && (se.Err == "message_not_found" || se.Err == "cant_update_message" || se.Err == "edit_window_closed")
		},
	}
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (Delivery.Streamed, stream.Final). Parts done by an earlier, failed attempt for
// the same outbox entry are not done again. It returns the first message's ts.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery) (string, error) {
	f := stream.Final{Parts: chunks(d.Text), Streamed: d.Streamed}
	if pr, _ := a.progress.Get(d.Outbox, a.clock.Now()); pr.n == len(f.Parts) {
		f.Done, f.First = pr.posted, pr.firstTS
	}
	if err := f.Finish(ctx, a.streamOps(conv, d.Sender), a.log.With("channel", conv.Channel)); err != nil {
		if d.Outbox != 0 {
			a.progress.Put(d.Outbox, progress{n: len(f.Parts), firstTS: f.First, posted: f.Done}, a.clock.Now())
		}
		a.log.Warn("slack streamed reply failed", "channel", conv.Channel, "chunk", f.Done+1, "of", len(f.Parts), "err", err)
		return "", mapError(err)
	}
	a.progress.Delete(d.Outbox)
	return f.First, nil
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
	a.sent()
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
	a.sent()
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
