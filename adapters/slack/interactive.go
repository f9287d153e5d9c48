package slack

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// Notices sent privately (chat.postEphemeral) to the person who clicked a question
// button (DESIGN.md §5).
const (
	noticeForbiddenBot = "Only approvers of @%s can answer this."
	noticeForbidden    = "Only approvers can answer this."
	noticeDecided      = "Already decided: "
	noticeUnknown      = "This question is no longer known to openbot, so nothing was changed."
	noticeFailed       = "Your answer could not be recorded. Please try again."
)

// Background work of the adapter (ephemeral notices after a click was answered).
const (
	// maxBackground bounds notices in flight; beyond it a notice is dropped and
	// logged (it is cosmetic: the answer itself is already stored).
	maxBackground = 64
	// noticeTimeout bounds one chat.postEphemeral.
	noticeTimeout = 10 * time.Second
)

// click is one press of a question button, parsed from a block_actions payload.
type click struct {
	token    string
	index    int
	team     string
	user     string
	userName string // from the payload; the fallback display name
	channel  string
	threadTS string
}

// parseClick finds the first question button in a block_actions payload (action_id
// "openbot_q_<index>", value "<token>:<index>"). ok is false for other interactions.
func parseClick(cb slack.InteractionCallback) (click, bool) {
	if cb.Type != slack.InteractionTypeBlockActions {
		return click{}, false
	}
	for _, act := range cb.ActionCallback.BlockActions {
		if act == nil {
			continue
		}
		token, idx, ok := ParseButton(act.ActionID, act.Value)
		if !ok {
			continue
		}
		c := click{token: token, index: idx, team: cb.Team.ID, user: cb.User.ID,
			userName: cb.User.Name, channel: cb.Container.ChannelID, threadTS: cb.Container.ThreadTs}
		c.team = cmp.Or(c.team, cb.User.TeamID)
		c.userName = cmp.Or(c.userName, cb.User.Username)
		c.channel = cmp.Or(c.channel, cb.Channel.ID)
		return c, true
	}
	return click{}, false
}

// handleClick answers the question a button click names (DESIGN.md §5): the
// clicker "slack:<team>:<user>" and their display name go to Engine.Answer, which
// authorizes and stores the first valid answer in one transaction; the buttons are
// then replaced by the delivery lanes, not here. With lookup false (the HTTP path,
// which must answer Slack within 3 s) no Web API call is made: the display name
// comes from the users.info cache, else from the payload. It returns the private
// notice to send afterwards (forbidden, already decided, unknown, failed), or nil.
func (a *Adapter) handleClick(ctx context.Context, cb slack.InteractionCallback, lookup bool) func(context.Context) {
	c, ok := parseClick(cb)
	if !ok {
		a.refuse("interaction is not a click on an openbot question button", "type", string(cb.Type), "user", cb.User.ID)
		return nil
	}
	if c.user == "" {
		a.refuse("click without an identifiable user", "token", c.token)
	}
	if c.team == "" {
		c.team = a.knownTeam()
	}
	ans := core.Answer{Token: c.token, Choice: c.index, Name: a.clickerName(ctx, c, lookup), Account: a.Account()}
	if c.user != "" && c.team != "" {
		ans.Actor = HumanActor(c.team, c.user)
	}
	log := a.log.With("token", c.token, "choice", c.index, "actor", string(ans.Actor))
	res, err := a.engine.Answer(ctx, ans)
	var text string
	switch {
	case err != nil:
		log.Error("slack answer not stored", "err", err)
		text = noticeFailed
	case res.Outcome == core.AnswerAccepted:
		log.Info("slack question answered", "question", res.Question.ID, "decision", res.Question.Decision())
		return nil
	case res.Outcome == core.AnswerForbidden:
		a.refuse("clicker may not answer this question", "question", res.Question.ID, "token", c.token, "actor", string(ans.Actor))
		text = noticeForbidden
		if h := botHandle(res.Question.Bot); h != "" {
			text = escapeText(fmt.Sprintf(noticeForbiddenBot, h))
		}
	case res.Outcome == core.AnswerDecided:
		log.Info("slack answer too late", "question", res.Question.ID)
		text = noticeDecided + escapeText(res.Question.Decision())
	default:
		a.refuse("click for an unknown question or choice", "token", c.token, "choice", c.index)
		text = noticeUnknown
	}
	if c.user == "" || c.channel == "" {
		return nil
	}
	return func(ctx context.Context) { a.postNotice(ctx, c, text) }
}

// clickerName is the display name stored with the answer.
func (a *Adapter) clickerName(ctx context.Context, c click, lookup bool) string {
	if c.user == "" {
		return c.userName
	}
	var (
		u  cachedUser
		ok bool
	)
	if lookup {
		u, ok = a.lookupUser(ctx, c.user)
	} else {
		u, ok = a.users.Get(c.user, a.clock.Now())
	}
	if ok && u.name != "" && u.name != c.user {
		return u.name
	}
	if c.userName != "" {
		return c.userName
	}
	return c.user
}

// postNotice sends text privately to the clicker in the question's thread.
func (a *Adapter) postNotice(ctx context.Context, c click, text string) {
	ctx, cancel := context.WithTimeout(ctx, noticeTimeout)
	defer cancel()
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if c.threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(c.threadTS))
	}
	if _, err := a.api.PostEphemeralContext(ctx, c.channel, c.user, opts...); err != nil {
		a.log.Warn("slack ephemeral notice failed", "channel", c.channel, "user", c.user, "err", err)
	}
}

// knownTeam is the team from auth.test if it already ran, else "" (no I/O).
func (a *Adapter) knownTeam() string {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.id == nil {
		return ""
	}
	return a.id.Team
}

// botHandle returns the handle of a bot ActorID ("bot:engineer" -> "engineer").
func botHandle(id core.ActorID) string {
	const p = "bot:"
	if s := string(id); len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return ""
}

// background runs the adapter's fire-and-forget work (notices after a click was
// answered): at most maxBackground at a time, each bounded by its own timeout, and
// waited for (bounded) when Run returns. Safe for concurrent use.
type background struct {
	sem chan struct{}
	wg  sync.WaitGroup
}

func newBackground(n int) *background { return &background{sem: make(chan struct{}, n)} }

// spawn runs fn in a new goroutine with a context detached from the caller's
// cancellation (the caller is an HTTP handler that has already answered). It
// reports false, running nothing, when maxBackground tasks are in flight.
func (b *background) spawn(ctx context.Context, fn func(context.Context)) bool {
	select {
	case b.sem <- struct{}{}:
	default:
		return false
	}
	b.wg.Add(1)
	go func() {
		defer func() { <-b.sem; b.wg.Done() }()
		fn(context.WithoutCancel(ctx))
	}()
	return true
}

// wait waits for running tasks, at most d; it reports whether they all finished.
func (b *background) wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// notify runs a click's notice in the background, logging when it is dropped.
func (a *Adapter) notify(ctx context.Context, notice func(context.Context)) {
	if notice == nil {
		return
	}
	if !a.bg.spawn(ctx, notice) {
		a.log.Warn("slack notice dropped: too many in flight")
	}
}
