package feishu

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"openbot/core"
)

// DefaultWorkingEmoji is the reaction (Feishu emoji_type) put on the message a
// bot is working on, like Slack's eyes reaction and Telegram's typing action.
const DefaultWorkingEmoji = "Typing"

// maxWorking bounds the runs tracked at once; beyond it a start shows nothing.
const maxWorking = 1024

// CodeReactionGone is Feishu's answer when the reaction to remove is not there.
const CodeReactionGone = 231003

// workKey is one run's work in one conversation.
type workKey struct {
	run  core.RunID
	conv core.ConversationRef
}

// workMsg is the reaction on one message: shown while n > 0.
type workMsg struct {
	n        int        // runs working on it; guarded by working.mu
	op       sync.Mutex // serializes this message's add and remove calls
	reaction string     // reaction_id while shown; guarded by op
}

// working counts, per message, the runs working on it, so the reaction stays
// until the last of them ends. Safe for concurrent use; bounded by maxWorking.
type working struct {
	emoji string
	mu    sync.Mutex
	msgs  map[string]*workMsg // by message_id
	runs  map[workKey]string  // message_id each run marks
}

func newWorking(emoji string) *working {
	emoji = cmp.Or(emoji, DefaultWorkingEmoji)
	return &working{emoji: emoji, msgs: map[string]*workMsg{}, runs: map[workKey]string{}}
}

var _ core.WorkIndicator = (*Adapter)(nil)

// Working shows that a bot works in a conversation (core.WorkIndicator): when a
// run starts or resumes, the WorkingEmoji reaction is added to the message it
// answers (w.ReplyTo; else the topic root), with POST
// /open-apis/im/v1/messages/:message_id/reactions; when the last run working on
// that message ends or pauses, it is removed (DELETE .../reactions/:reaction_id).
// Best effort: failures (no im:message.reactions:write_only scope) are logged at
// debug. Calls are bounded by ctx.
func (a *Adapter) Working(ctx context.Context, w core.Work) {
	wk := a.working
	if wk.emoji == "-" {
		return
	}
	key := workKey{w.Run, w.Conversation}
	wk.mu.Lock()
	if w.Started {
		mid := w.ReplyTo
		if mid == "" {
			if conv, err := ParseConversation(w.Conversation); err == nil {
				mid = conv.Root
			}
		}
		if _, busy := wk.runs[key]; busy || mid == "" || len(wk.runs) >= maxWorking {
			wk.mu.Unlock()
			return
		}
		wk.runs[key] = mid
		m := wk.msgs[mid]
		if m == nil {
			m = &workMsg{}
			wk.msgs[mid] = m
		}
		m.n++
		wk.mu.Unlock()
		a.react(ctx, mid, m)
		return
	}
	mid, ok := wk.runs[key]
	if !ok {
		wk.mu.Unlock()
		return
	}
	delete(wk.runs, key)
	m := wk.msgs[mid]
	m.n--
	wk.mu.Unlock()
	a.unreact(ctx, mid, m)
}

// react adds the reaction unless it is shown already or no run works on mid.
func (a *Adapter) react(ctx context.Context, mid string, m *workMsg) {
	m.op.Lock()
	defer m.op.Unlock()
	a.working.mu.Lock()
	n := m.n
	a.working.mu.Unlock()
	if m.reaction != "" || n <= 0 {
		return
	}
	id, err := a.api.addReaction(ctx, mid, a.working.emoji)
	if err != nil {
		a.log.Debug("feishu working reaction not added", "message_id", mid, "err", err)
		return
	}
	m.reaction = id
}

// unreact removes the reaction once no run works on mid any more.
func (a *Adapter) unreact(ctx context.Context, mid string, m *workMsg) {
	m.op.Lock()
	defer m.op.Unlock()
	a.working.mu.Lock()
	n := m.n
	if n <= 0 && a.working.msgs[mid] == m {
		delete(a.working.msgs, mid)
	}
	a.working.mu.Unlock()
	if n > 0 || m.reaction == "" {
		return
	}
	err := a.api.removeReaction(ctx, mid, m.reaction)
	var ae *APIError
	if err != nil && !(errors.As(err, &ae) && ae.Code == CodeReactionGone) {
		a.log.Debug("feishu working reaction not removed", "message_id", mid, "err", err)
		return
	}
	m.reaction = ""
}
