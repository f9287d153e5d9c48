// Package stream is the part of showing a reply while it is written
// (core.Streamer, DESIGN.md §6) that the chat adapters do the same way: keep the
// messages of one streamed reply in step with the parts of the text so far, and
// make them the final reply. What a part is and how a message is posted, edited
// and deleted stays with each adapter (Ops).
package stream

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"openbot/core"
)

// Pace is the StreamInterval half of core.Streamer, embedded by the adapters:
// the least time between two edits of one streamed reply, 0 when streaming is off.
type Pace struct {
	On    bool
	Every time.Duration
}

// StreamInterval implements core.Streamer.
func (p Pace) StreamInterval() time.Duration {
	if !p.On {
		return 0
	}
	return p.Every
}

// NewPace returns the Pace of an adapter's options: every, or def when every is
// not positive.
func NewPace(on bool, every, def time.Duration) Pace {
	if every <= 0 {
		every = def
	}
	return Pace{On: on, Every: every}
}

// Ops is what a platform does to the messages of one streamed reply.
type Ops struct {
	// Edit replaces the content of message id with part.
	Edit func(ctx context.Context, id, part string) error
	// Post sends part i as a new message and returns its id.
	Post func(ctx context.Context, i int, part string) (string, error)
	// Delete removes messages; one already gone counts as deleted.
	Delete func(ctx context.Context, ids []string) error
	// Gone reports an Edit error saying the message no longer exists (deleted by
	// someone, or too old to edit): Finish posts the part anew instead.
	Gone func(error) bool
}

// Update is core.Streamer.Stream after the adapter parsed the conversation:
// parts splits Markdown the way Deliver does. Parts that did not change since
// s.Shown are left alone, changed ones edited, parts the text grew into posted,
// surplus messages deleted; empty text deletes every streamed message. It
// returns the ids of the messages now showing the reply, also on error (those
// done so far), so the next call goes on from there.
func Update(ctx context.Context, s core.StreamDelivery, parts func(string) []string, ops Ops) ([]string, error) {
	if strings.TrimSpace(s.Text) == "" {
		return nil, ops.Delete(ctx, s.Posted)
	}
	now := parts(s.Text)
	var shown []string
	if s.Shown != "" {
		shown = parts(s.Shown)
	}
	ids := append([]string(nil), s.Posted...)
	for i, p := range now {
		if i < len(ids) {
			if i < len(shown) && shown[i] == p {
				continue
			}
			if err := ops.Edit(ctx, ids[i], p); err != nil {
				return ids, err
			}
			continue
		}
		id, err := ops.Post(ctx, i, p)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	if len(ids) > len(now) {
		if err := ops.Delete(ctx, ids[len(now):]); err != nil {
			return ids, err
		}
		ids = ids[:len(now)]
	}
	return ids, nil
}

// Final is a streamed reply being made the final one (core.Delivery.Streamed).
// Done and First carry an earlier, failed attempt's progress, so that a retry
// after a 429 neither duplicates nor truncates the answer.
type Final struct {
	Parts    []string // the final reply, split as Deliver splits it
	Streamed []string // the messages the reply was streamed into
	Done     int      // parts already in place
	First    string   // the first message's id; "" means Streamed[0]
}

// Finish edits each streamed message at its place to the final part (posting
// the part when the text outgrew them, or when ops.Gone says the message is
// gone) and deletes surplus streamed messages, logging a failure to delete to
// log. On error Done and First say where the next attempt goes on.
func (f *Final) Finish(ctx context.Context, ops Ops, log *slog.Logger) error {
	f.First = cmp.Or(f.First, f.Streamed[0])
	for i := f.Done; i < len(f.Parts); i++ {
		var err error
		if i < len(f.Streamed) {
			err = ops.Edit(ctx, f.Streamed[i], f.Parts[i])
			if err != nil && ops.Gone(err) {
				var id string
				if id, err = ops.Post(ctx, i, f.Parts[i]); err == nil && i == 0 {
					f.First = id
				}
			}
		} else {
			_, err = ops.Post(ctx, i, f.Parts[i])
		}
		if err != nil {
			return err
		}
		f.Done = i + 1
	}
	if len(f.Streamed) > len(f.Parts) {
		if err := ops.Delete(ctx, f.Streamed[len(f.Parts):]); err != nil {
			log.Warn("deleting surplus streamed messages failed", "err", err)
		}
	}
	return nil
}
