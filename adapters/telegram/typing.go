package telegram

import (
	"context"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// Typing indicator (issue 4 item 5): Telegram shows "typing…" for about 5 seconds
// per sendChatAction, so it is repeated while a bot works on a chat. Core has no
// run-start or run-end hook yet, so the adapter starts it when Ingest woke a bot and
// stops it at the next Deliver to that conversation or after typingMax.
const (
	typingEvery   = 4 * time.Second
	typingMax     = 2 * time.Minute
	typingQueue   = 64
	typingTimeout = 5 * time.Second
)

type typingReq struct {
	conv Conversation
	stop bool
}

// startTyping asks the typist to show "typing…" in conv; dropped if its queue is full.
func (a *Adapter) startTyping(conv Conversation) {
	select {
	case a.typingCh <- typingReq{conv: conv}:
	default:
	}
}

// stopTyping asks the typist to stop showing "typing…" in conv.
func (a *Adapter) stopTyping(conv Conversation) {
	select {
	case a.typingCh <- typingReq{conv: conv, stop: true}:
	default:
	}
}

// typist is Run's helper goroutine that sends the typing actions, one at a time,
// until ctx is done.
func (a *Adapter) typist(ctx context.Context) {
	active := map[Conversation]time.Time{} // until when
	t := time.NewTicker(typingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-a.typingCh:
			_, on := active[r.conv]
			switch {
			case r.stop:
				delete(active, r.conv)
			case !on:
				active[r.conv] = time.Now().Add(typingMax)
				a.sendTyping(ctx, r.conv)
			default:
				active[r.conv] = time.Now().Add(typingMax)
			}
		case now := <-t.C:
			for conv, until := range active {
				if now.After(until) {
					delete(active, conv)
					continue
				}
				a.sendTyping(ctx, conv)
			}
		}
	}
}

func (a *Adapter) sendTyping(ctx context.Context, conv Conversation) {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(conv.Chat, 10), "action": "typing"}
	p.AddNonZero64("message_thread_id", conv.Topic)
	if _, err := a.call(ctx, "sendChatAction", p, typingTimeout); err != nil && ctx.Err() == nil {
		a.log.Debug("sendChatAction failed", "err", err)
	}
}
