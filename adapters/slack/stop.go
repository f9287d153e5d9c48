package slack

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/slack-go/slack"

	"openbot/core"
)

// /stop (DESIGN.md §10): an approver of a thread stops the bots' work in it
// (core.Stopper; the same rule as approving). It arrives as the slash command
// "/stop" (in a DM: the DM's current thread; Slack sends no thread with a slash
// command, so in a channel it explains itself), or as a plain message that is
// "/stop" or "stop", with or without the app's mention: in a DM, or as a reply
// in the Slack thread to stop. The answer is private (an ephemeral message, or
// the slash command's reply) and no model is called; the thread itself gets
// core's notice naming who stopped the work.
const (
	replyStopChannel     = "Slack does not say which thread a slash command was typed in: reply \"stop\" (mentioning the app) in the thread to stop."
	replyStopUnavailable = "Stopping is not available here."
)

// stopCommand reports whether a message's normalized text is a plain-text
// /stop: "/stop" or "stop" (any case), after any leading @mentions.
func stopCommand(text string) bool {
	f := strings.Fields(text)
	for len(f) > 1 && strings.HasPrefix(f[0], "@") {
		f = f[1:]
	}
	return len(f) == 1 && (strings.EqualFold(f[0], "stop") || strings.EqualFold(f[0], "/stop"))
}

// stop asks the engine to stop the work of thread key on behalf of the sender
// and returns the private reply. An engine without core.Stopper answers
// replyStopUnavailable. Errors are store failures.
func (a *Adapter) stop(ctx context.Context, key, team, user string) (string, core.StopOutcome, error) {
	s, ok := a.engine.(core.Stopper)
	if !ok {
		return replyStopUnavailable, core.StopNothing, nil
	}
	res, err := s.Stop(ctx, core.StopRequest{ThreadKey: key, Actor: HumanActor(team, user), Name: a.userName(ctx, user), Account: a.Account()})
	if err != nil {
		return "", 0, err
	}
	return core.StopReply(res), res.Outcome, nil
}

// stopCommandSlash handles the /stop slash command (after the allow lists).
func (a *Adapter) stopCommandSlash(ctx context.Context, cmd slack.SlashCommand) (string, error) {
	if !isDMChannel(cmd.ChannelID, "") {
		return replyStopChannel, nil
	}
	team := cmd.TeamID
	if team == "" {
		id, err := a.identity(ctx)
		if err != nil {
			return "", err
		}
		team = id.Team
	}
	reply, _, err := a.stop(ctx, ThreadKey(team, cmd.ChannelID, "", "", true), team, cmd.UserID)
	return reply, err
}

// ephemeral posts text privately to user in channel (in the Slack thread
// threadTS when set), in the background after the event is acknowledged.
func (a *Adapter) ephemeral(ctx context.Context, channel, user, threadTS, text string) {
	a.notify(ctx, func(ctx context.Context) {
		a.postNotice(ctx, click{channel: channel, user: user, threadTS: threadTS}, text)
	})
}

// handleStop answers a plain-text /stop message: it stops the work of the
// message's thread for its sender and tells them privately how it went. Slack
// sends a mention twice (app_mention and message); the second copy is ignored.
// Where several apps see the message (one per bot), the one not mentioned
// (self false) stays quiet when it found nothing to stop, so the person reads
// one answer.
func (a *Adapter) handleStop(ctx context.Context, m message, dm, self bool) error {
	if !a.stops.first(DedupKey(m.Team, m.Channel, m.TS)) {
		return nil
	}
	reply, outcome, err := a.stop(ctx, ThreadKey(m.Team, m.Channel, m.TS, m.ThreadTS, dm), m.Team, m.User)
	if err != nil {
		a.stops.forget(DedupKey(m.Team, m.Channel, m.TS))
		return fmt.Errorf("slack /stop in %s: %w", m.Channel, err)
	}
	a.log.Info("slack /stop", "channel", m.Channel, "user", m.User, "reply", reply)
	if outcome == core.StopNothing && !dm && !self {
		return nil
	}
	a.ephemeral(ctx, m.Channel, m.User, m.ThreadTS, reply)
	return nil
}

// maxStopSeen bounds the remembered /stop messages; past it the memory starts
// over (a copy arriving after that only gets a second "nothing to stop").
const maxStopSeen = 256

// stopSeen remembers the /stop messages handled lately. The zero value is ready.
type stopSeen struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether key is seen for the first time, and remembers it.
func (s *stopSeen) first(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] {
		return false
	}
	if s.seen == nil || len(s.seen) >= maxStopSeen {
		s.seen = map[string]bool{}
	}
	s.seen[key] = true
	return true
}

func (s *stopSeen) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

// handlePeopleCommand answers /pair, /people and /revoke (core.Commander), typed
// in a DM or with the app's mention, privately. Like /stop, a message Slack sends
// twice (app_mention and message) is answered once.
func (a *Adapter) handlePeopleCommand(ctx context.Context, m message, dm bool, name, args string) error {
	key := DedupKey(m.Team, m.Channel, m.TS)
	if !a.stops.first(key) {
		return nil
	}
	c, ok := a.engine.(core.Commander)
	if !ok {
		a.ephemeral(ctx, m.Channel, m.User, m.ThreadTS, "That command is not available here.")
		return nil
	}
	reply, err := c.Command(ctx, core.Command{Name: name, Args: args, Actor: HumanActor(m.Team, m.User),
		ActorName: a.userName(ctx, m.User), Account: a.Account(), Conversation: ReplyConversation(m.Team, m.Channel, m.TS, m.ThreadTS, dm).Ref(), Direct: dm})
	if err != nil {
		a.stops.forget(key)
		return fmt.Errorf("slack /%s in %s: %w", name, m.Channel, err)
	}
	a.log.Info("slack people command", "command", name, "channel", m.Channel, "user", m.User)
	if dm {
		a.confirm(ctx, m.Channel, reply)
	} else {
		a.ephemeral(ctx, m.Channel, m.User, m.ThreadTS, reply)
	}
	return nil
}
