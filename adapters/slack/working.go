package slack

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// WorkingReaction is the reaction put on the message a bot is working on: while a
// bot works on a thread it shows, and it is removed when the bot is done
// (core.WorkIndicator).
const WorkingReaction = "eyes"

const (
	// reactionLinger is how long the reaction stays after the last bot working on
	// a message ended. Core reports a run's end before the run's reply is delivered
	// and before a bot it handed off to starts, so taking the reaction off at once
	// would remove it just before the answer shows, and make it flicker off and on
	// at every hand-off.
	reactionLinger = 2 * time.Second
	// reactionTimeout bounds one reactions.add or reactions.remove call.
	reactionTimeout = 5 * time.Second
	// maxWorking bounds the runs tracked at once; beyond it a start shows nothing.
	maxWorking = 1024
)

// msgKey is a Slack message: channel and ts.
type msgKey struct{ channel, ts string }

// runKey is one run's work in one conversation.
type runKey struct {
	run  core.RunID
	conv core.ConversationRef
}

// reaction is the working state of one message.
type reaction struct {
	conv  core.ConversationRef // the conversation whose work put it there
	seq   uint64               // when work last started on it, to find the latest
	n     int                  // runs working on it; guarded by working.mu
	timer stopper              // pending removal after the last end; guarded by working.mu
	gen   uint64               // bumped when timer is replaced or cancelled; guarded by working.mu
	op    chan struct{}        // capacity 1: serializes this message's add and remove calls
	shown bool                 // the reaction is (or may be) on the message; guarded by op
}

// working counts, per message, the runs working on it (core.WorkIndicator), so the
// reaction stays until the last of them ends. Safe for concurrent use; bounded by
// maxWorking runs plus the messages still lingering.
type working struct {
	mu     sync.Mutex
	linger time.Duration
	seq    uint64
	msgs   map[msgKey]*reaction
	runs   map[runKey]msgKey
	closed bool           // Run returned: no new work shown, removals immediate
	wg     sync.WaitGroup // lingering removals, pending or running
	// afterFunc starts a lingering removal: time.AfterFunc, or a test's timers
	// that it fires itself.
	afterFunc func(d time.Duration, f func()) stopper
}

// stopper is what a lingering removal keeps of its timer (*time.Timer).
type stopper interface{ Stop() bool }

func newWorking(linger time.Duration) *working {
	return &working{linger: linger, msgs: map[msgKey]*reaction{}, runs: map[runKey]msgKey{},
		afterFunc: func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }}
}

var _ core.WorkIndicator = (*Adapter)(nil)

// Working shows that a bot works in a conversation (core.WorkIndicator):
// when a run starts or resumes, WorkingReaction is added to the message it
// answers (w.ReplyTo, that message's ts). A run without one (a bot woken by another
// bot's hand-off) marks the message that carries the reaction for earlier work in
// the same conversation, else the conversation's thread root. When the run ends or
// pauses for a person, the reaction is taken off once no run works on that message
// any more, reactionLinger later, so it survives a hand-off and goes only after
// the reply has been posted. Best effort: failures (no reactions:write scope) are
// logged at debug; already_reacted and no_reaction count as success. Web API calls
// are bounded by ctx, except the lingering removal, which has its own timeout and
// is done at once when Run returns.
func (a *Adapter) Working(ctx context.Context, w core.Work) {
	if w.Started {
		a.startWork(ctx, w)
	} else {
		a.endWork(ctx, w)
	}
}

func (a *Adapter) startWork(ctx context.Context, w core.Work) {
	conv, err := ParseConversation(w.Conversation)
	if err != nil {
		a.log.Debug("slack working: bad conversation", "conversation", w.Conversation, "err", err)
		return
	}
	st := a.working
	rk := runKey{w.Run, w.Conversation}
	st.mu.Lock()
	if _, dup := st.runs[rk]; dup || st.closed {
		st.mu.Unlock()
		return
	}
	if len(st.runs) >= maxWorking {
		st.mu.Unlock()
		a.log.Debug("slack working reaction skipped: too many runs tracked", "run", w.Run)
		return
	}
	ts := w.ReplyTo
	if ts == "" {
		var latest uint64
		for k, r := range st.msgs {
			if r.conv == w.Conversation && k.channel == conv.Channel && r.seq > latest {
				ts, latest = k.ts, r.seq
			}
		}
	}
	ts = cmp.Or(ts, conv.ThreadTS)
	if ts == "" {
		st.mu.Unlock()
		a.log.Debug("slack working reaction skipped: no message to mark", "run", w.Run, "conversation", w.Conversation)
		return
	}
	k := msgKey{conv.Channel, ts}
	r := st.msgs[k]
	if r == nil {
		r = &reaction{conv: w.Conversation, op: make(chan struct{}, 1)}
		st.msgs[k] = r
	}
	st.seq++
	r.seq = st.seq
	r.n++
	if r.timer != nil { // ended a moment ago: keep it instead
		r.gen++
		if r.timer.Stop() {
			st.wg.Done()
		}
		r.timer = nil
	}
	st.runs[rk] = k
	st.mu.Unlock()
	a.reconcile(ctx, k, r)
}

func (a *Adapter) endWork(ctx context.Context, w core.Work) {
	st := a.working
	rk := runKey{w.Run, w.Conversation}
	st.mu.Lock()
	k, ok := st.runs[rk]
	if !ok { // its start showed nothing
		st.mu.Unlock()
		return
	}
	delete(st.runs, rk)
	r := st.msgs[k]
	r.n--
	if r.n > 0 {
		st.mu.Unlock()
		return
	}
	if st.closed || st.linger <= 0 {
		st.mu.Unlock()
		a.reconcile(ctx, k, r)
		return
	}
	r.gen++
	gen := r.gen
	st.wg.Add(1)
	r.timer = st.afterFunc(st.linger, func() { a.lingerDone(k, r, gen) })
	st.mu.Unlock()
}

// lingerDone runs reactionLinger after the last end on r: unless work started on it
// again meanwhile, the reaction is taken off.
func (a *Adapter) lingerDone(k msgKey, r *reaction, gen uint64) {
	st := a.working
	defer st.wg.Done()
	st.mu.Lock()
	if r.gen != gen {
		st.mu.Unlock()
		return
	}
	r.timer = nil
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), reactionTimeout)
	defer cancel()
	a.reconcile(ctx, k, r)
}

// reconcile makes the message show the reaction when a run works on it (or its
// removal is pending) and not otherwise. Calls for one message are serialized and
// each applies the state current when it runs, so concurrent starts and ends
// settle on the last state whatever order they run in. A message nobody works on
// any more is forgotten.
func (a *Adapter) reconcile(ctx context.Context, k msgKey, r *reaction) {
	select {
	case r.op <- struct{}{}:
	case <-ctx.Done():
		a.log.Debug("slack working reaction not updated", "channel", k.channel, "ts", k.ts, "err", ctx.Err())
		return
	}
	defer func() { <-r.op }()
	st := a.working
	st.mu.Lock()
	want := r.n > 0 || r.timer != nil
	st.mu.Unlock()
	ref := slack.NewRefToMessage(k.channel, k.ts)
	switch {
	case want && !r.shown:
		cctx, cancel := context.WithTimeout(ctx, reactionTimeout)
		err := a.api.AddReactionContext(cctx, WorkingReaction, ref)
		cancel()
		if err != nil && isSlackErr(err, "already_reacted") {
			err = nil
		}
		// A refusal from Slack means it is not there; a transport error may hide a
		// success, so the end still tries to remove it.
		var se slack.SlackErrorResponse
		r.shown = err == nil || !errors.As(err, &se)
		if err != nil {
			a.log.Debug("slack working reaction not added", "channel", k.channel, "ts", k.ts, "err", err)
		}
	case !want && r.shown:
		cctx, cancel := context.WithTimeout(ctx, reactionTimeout)
		err := a.api.RemoveReactionContext(cctx, WorkingReaction, ref)
		cancel()
		r.shown = false
		if err != nil && !isSlackErr(err, "no_reaction") {
			a.log.Debug("slack working reaction not removed", "channel", k.channel, "ts", k.ts, "err", err)
		}
	}
	if !want {
		st.mu.Lock()
		if r.n == 0 && r.timer == nil && st.msgs[k] == r {
			delete(st.msgs, k)
		}
		st.mu.Unlock()
	}
}

func isSlackErr(err error, code string) bool {
	var se slack.SlackErrorResponse
	return errors.As(err, &se) && se.Err == code
}

// openWorking is called when Run starts: work is shown again. Run may start
// again after it returned: a process sharing the store runs Socket Mode only
// while it holds the account's ingress lease (DESIGN.md §7), and takes it back
// later.
func (a *Adapter) openWorking() {
	a.working.mu.Lock()
	a.working.closed = false
	a.working.mu.Unlock()
}

// closeWorking is called when Run returns: new work is no longer shown, pending
// removals run now, and it waits for them at most d.
func (a *Adapter) closeWorking(d time.Duration) {
	st := a.working
	st.mu.Lock()
	st.closed = true
	for k, r := range st.msgs {
		if r.timer == nil || !r.timer.Stop() {
			continue // none pending, or already running
		}
		r.gen++
		r.timer = nil
		go func() {
			defer st.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), reactionTimeout)
			defer cancel()
			a.reconcile(ctx, k, r)
		}()
	}
	st.mu.Unlock()
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.log.Warn("slack working reactions not all removed at shutdown")
	}
}
