package telegram

import (
	"context"
	"strconv"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// Typing indicator ("typing chat action repeated every few seconds
// while a bot works on the chat"). Telegram shows "typing…" for about 5 seconds per
// sendChatAction, or until the bot's next message, so it is repeated while core
// reports a bot working in the conversation (core.WorkIndicator).
const (
	typingEvery   = 4 * time.Second
	typingMax     = 10 * time.Minute // safety cap: a conversation shows typing at most this long per start
	typingTimeout = 5 * time.Second  // one repeated sendChatAction
	maxTyping     = 1024             // runs tracked at once; beyond it a start shows nothing
)

// typingRun is one run's work in one conversation.
type typingRun struct {
	run  core.RunID
	conv Conversation
}

// typingChat is a conversation some runs work in. It exists only while a run
// works there: the last end deletes it, and typingChats releases it (with its runs)
// once typingMax has passed since the latest start, so a run whose end never comes
// holds nothing after that.
type typingChat struct {
	n     int       // runs working there
	since time.Time // last start
}

// typing counts the runs working in each conversation. Safe for concurrent use.
type typing struct {
	mu    sync.Mutex
	every time.Duration
	max   time.Duration
	runs  map[typingRun]bool
	chats map[Conversation]*typingChat
	done  bool // Run's typist has stopped: nothing more is sent
	// typists counts the typist goroutines running: Run's and RunTypist's;
	// only the first repeats, so a process running both sends each repeat once.
	typists int
	// afterRound, when set (by tests, before a typist starts), is called after
	// each round of the repeating typist, one with nothing to repeat included.
	afterRound func()
}

func newTyping() *typing {
	return &typing{every: typingEvery, max: typingMax, runs: map[typingRun]bool{}, chats: map[Conversation]*typingChat{}}
}

var _ core.WorkIndicator = (*Adapter)(nil)

// Working implements core.WorkIndicator: while at least one bot works in a chat (or
// forum topic) the chat shows "typing…". The first start there sends sendChatAction
// at once, bounded by ctx; Run's typist repeats it every 4 seconds until the last
// run working there ends or pauses for a person, for at most 10 minutes after the
// latest start, and not after Run returned. Counting is per run, so a repeated
// start or end changes nothing. Failures are logged at debug.
func (a *Adapter) Working(ctx context.Context, w core.Work) {
	conv, err := ParseConversation(w.Conversation)
	if err != nil {
		a.log.Debug("telegram working: bad conversation", "conversation", w.Conversation, "err", err)
		return
	}
	t := a.typing
	k := typingRun{w.Run, conv}
	t.mu.Lock()
	if !w.Started {
		if t.runs[k] {
			delete(t.runs, k)
			c := t.chats[conv]
			if c.n--; c.n == 0 {
				delete(t.chats, conv)
			}
		}
		t.mu.Unlock()
		return
	}
	if t.runs[k] || len(t.runs) >= maxTyping {
		t.mu.Unlock()
		return
	}
	t.runs[k] = true
	c := t.chats[conv]
	if c == nil {
		c = &typingChat{}
		t.chats[conv] = c
	}
	c.n++
	c.since = time.Now()
	send := c.n == 1 && !t.done
	t.mu.Unlock()
	if send {
		a.sendTyping(ctx, conv, typingTimeout)
	}
}

// typist is Run's helper goroutine: every typing.every it repeats the typing action
// in each conversation a bot works in, until ctx is done.
func (a *Adapter) typist(ctx context.Context) {
	t := a.typing
	t.mu.Lock()
	t.done = false
	every := t.every
	t.typists++
	first := t.typists == 1
	afterRound := t.afterRound
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.typists--
		t.done = t.typists == 0
		t.mu.Unlock()
	}()
	if !first {
		<-ctx.Done() // the other typist repeats; this one only keeps typing on until ctx ends
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var wg sync.WaitGroup
		for _, conv := range a.typingChats(time.Now()) {
			wg.Go(func() {
				if a.stillTyping(conv) {
					a.sendTyping(ctx, conv, every)
				}
			})
		}
		wg.Wait() // one round at a time, so a slow chat never piles calls up
		if afterRound != nil {
			afterRound()
		}
	}
}

// RunTypist repeats the typing action for the runs this process executes
// until ctx is done, without the ingress: a process sharing the store whose
// Run is not running (another process holds the account's polling, DESIGN.md
// §7) still shows its bots typing. With Run also running, repeats are sent
// once.
func (a *Adapter) RunTypist(ctx context.Context) error {
	a.typist(ctx)
	return nil
}

// typingChats returns the conversations to show typing in now, releasing those
// past the cap: the chat and the runs counted there are forgotten (a later end of
// such a run changes nothing; a later start shows typing again).
func (a *Adapter) typingChats(now time.Time) []Conversation {
	t := a.typing
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Conversation
	for conv, c := range t.chats {
		if now.Sub(c.since) <= t.max {
			out = append(out, conv)
			continue
		}
		a.log.Warn("typing indicator stopped: a bot has worked in this chat longer than the cap", "chat", conv.Chat, "topic", conv.Topic, "cap", t.max)
		delete(t.chats, conv)
		for k := range t.runs {
			if k.conv == conv {
				delete(t.runs, k)
			}
		}
	}
	return out
}

// stillTyping reports whether a bot still works in conv, so an end that came
// during a round stops it before its call.
func (a *Adapter) stillTyping(conv Conversation) bool {
	a.typing.mu.Lock()
	defer a.typing.mu.Unlock()
	return a.typing.chats[conv] != nil
}

func (a *Adapter) sendTyping(ctx context.Context, conv Conversation, timeout time.Duration) {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(conv.Chat, 10), "action": "typing"}
	p.AddNonZero64("message_thread_id", conv.Topic)
	if _, err := a.call(ctx, "sendChatAction", p, min(timeout, typingTimeout)); err != nil && ctx.Err() == nil {
		a.log.Debug("sendChatAction failed", "chat", conv.Chat, "topic", conv.Topic, "err", err)
	}
}
