package feishu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"openbot/adapters/internal/stream"
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
func (a *Adapter) StreamInterval() time.Duration { return a.pace.StreamInterval() }

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
	return stream.Update(ctx, s, func(text string) []string { return a.chunks(s.Sender, text) },
		a.streamOps(conv, s.ReplyTo, func(int) string { return "" }))
}

// chunks renders text as Deliver does (the bot's name on top when this app does
// not speak as it) and splits it.
func (a *Adapter) chunks(sender core.Sender, text string) []string {
	if sender.Handle != "" && (a.bot == "*" || sender.Handle != a.bot) {
		name := cmp.Or(sender.Name, sender.Handle)
		text = "**" + name + "**\n" + text
	}
	return Split(Format(text), MaxChunk)
}

// streamOps sends parts as cards replying to replyTo (part i with uuid(i), the
// idempotency key; "" for none), updates cards with PATCH and recalls with
// DELETE; a recalled message is gone.
func (a *Adapter) streamOps(conv Conversation, replyTo string, uuid func(i int) string) stream.Ops {
	return stream.Ops{
		Edit: func(ctx context.Context, id, c string) error { return a.api.patchCard(ctx, id, Card(c)) },
		Post: func(ctx context.Context, i int, c string) (string, error) {
			return a.send(ctx, conv, replyTo, c, uuid(i))
		},
		Delete: a.recallAll,
		Gone: func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Code == CodeMessageGone
		},
	}
}

// deliverStreamed makes the messages a reply was streamed into the final reply
// (core.Delivery.Streamed, stream.Final). Card updates are idempotent and sent
// parts carry the outbox entry's uuid, so a retry after a 429 neither duplicates
// nor truncates the answer without keeping progress. It returns the first
// message's id.
func (a *Adapter) deliverStreamed(ctx context.Context, conv Conversation, d core.Delivery) (string, error) {
	f := stream.Final{Parts: a.chunks(d.Sender, d.Text), Streamed: d.Streamed}
	uuid := func(i int) string { return fmt.Sprintf("openbot-%d-%d-%d", d.Outbox, d.Message, i) }
	if err := f.Finish(ctx, a.streamOps(conv, d.ReplyTo, uuid), a.log); err != nil {
		return "", err
	}
	return f.First, nil
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
