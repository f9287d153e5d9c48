package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// WorkingReaction is the reaction put on a message while a bot works on it (issue 3
// item 6 "while a bot is working on a thread, show it").
const WorkingReaction = "eyes"

// reactionTimeout bounds one reactions.add or reactions.remove call.
const reactionTimeout = 5 * time.Second

// working remembers the messages that carry WorkingReaction, per conversation, so
// the next reply delivered to that conversation can take it off. Core does not tell
// adapters when runs start and end, so "working" is approximated as "from the
// ingest that woke a bot until the next reply in that conversation". Bounded: at
// most max conversations are remembered, the oldest forgotten first. Safe for
// concurrent use.
type working struct {
	mu    sync.Mutex
	max   int
	order []core.ConversationRef
	m     map[core.ConversationRef][]reacted
}

type reacted struct{ channel, ts string }

func newWorking(max int) *working {
	return &working{max: max, m: map[core.ConversationRef][]reacted{}}
}

func (w *working) add(conv core.ConversationRef, r reacted) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[conv]; !ok {
		w.order = append(w.order, conv)
		for len(w.order) > w.max {
			delete(w.m, w.order[0])
			w.order = w.order[1:]
		}
	}
	w.m[conv] = append(w.m[conv], r)
}

// take removes and returns the reacted messages of conv.
func (w *working) take(conv core.ConversationRef) []reacted {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs, ok := w.m[conv]
	if !ok {
		return nil
	}
	delete(w.m, conv)
	for i, c := range w.order {
		if c == conv {
			w.order = append(w.order[:i], w.order[i+1:]...)
			break
		}
	}
	return rs
}

// markWorking puts WorkingReaction on a message a bot was woken for. Best effort:
// a failure (no reactions:write scope) is logged at debug and changes nothing else.
func (a *Adapter) markWorking(ctx context.Context, conv core.ConversationRef, channel, ts string) {
	ctx, cancel := context.WithTimeout(ctx, reactionTimeout)
	defer cancel()
	if err := a.api.AddReactionContext(ctx, WorkingReaction, slack.NewRefToMessage(channel, ts)); err != nil {
		a.log.Debug("slack working reaction not added", "channel", channel, "ts", ts, "err", err)
		return
	}
	a.working.add(conv, reacted{channel: channel, ts: ts})
}

// doneWorking takes WorkingReaction off the messages of conv. Best effort.
func (a *Adapter) doneWorking(ctx context.Context, conv core.ConversationRef) {
	for _, r := range a.working.take(conv) {
		cctx, cancel := context.WithTimeout(ctx, reactionTimeout)
		err := a.api.RemoveReactionContext(cctx, WorkingReaction, slack.NewRefToMessage(r.channel, r.ts))
		cancel()
		if err != nil {
			a.log.Debug("slack working reaction not removed", "channel", r.channel, "ts", r.ts, "err", err)
		}
	}
}
