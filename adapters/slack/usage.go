package slack

import (
	"context"
	"strings"

	"github.com/slack-go/slack"

	"openbot/core"
)

// /usage (cost control, "Seeing it"): the engine's ledger report
// (core.UsageReporter), answered privately and with no model call. It arrives
// as the slash command "/usage" (in a DM: the DM's current thread; Slack sends
// no thread with a slash command, so in a channel it reports the bot and all
// bots and says how to ask in a thread), or as a plain message that is "usage"
// or "/usage" after any leading mentions: in a DM, or as a reply in a Slack
// thread that mentions the app (or, for a "*" app, a bot), which reports that
// thread. The same rule as plain-text /stop (stop.go).
const (
	replyUsageChannel     = "Slack does not say which thread a slash command was typed in: for a thread's figures reply \"usage\" (mentioning the app) in the thread."
	replyUsageUnavailable = "Usage is not available here."
	replyUsageFailed      = "Usage could not be read just now; try again."
	noThreadLine          = "No openbot thread here yet.\n"
)

// usageCommand reports whether a message's normalized text is a plain-text
// /usage: "usage" or "/usage" (any case) after any leading @mentions; handle
// is the last leading mention ("" when none), which may name a bot.
func usageCommand(text string) (handle string, ok bool) {
	f := strings.Fields(text)
	for len(f) > 1 && strings.HasPrefix(f[0], "@") {
		handle = strings.ToLower(strings.TrimPrefix(f[0], "@"))
		f = f[1:]
	}
	return handle, len(f) == 1 && (strings.EqualFold(f[0], "usage") || strings.EqualFold(f[0], "/usage"))
}

// usageReport is the private reply for thread key ("" for none) and bot (""
// for the app's bot, or the thread's default bot for a "*" app).
func (a *Adapter) usageReport(ctx context.Context, key, bot string) string {
	u, ok := a.engine.(core.UsageReporter)
	if !ok {
		return replyUsageUnavailable
	}
	if bot == "" && a.bot != "*" {
		bot = a.bot
	}
	text, err := u.UsageReport(ctx, key, bot)
	if err != nil {
		a.log.Warn("usage report", "err", err)
		return replyUsageFailed
	}
	return text
}

// usage answers the /usage slash command privately: in a DM for its current
// thread, in a channel for the bot and all bots with replyUsageChannel first.
func (a *Adapter) usage(ctx context.Context, cmd slack.SlashCommand) string {
	if !isDMChannel(cmd.ChannelID, "") {
		text := a.usageReport(ctx, "", "")
		if text == replyUsageUnavailable || text == replyUsageFailed {
			return text
		}
		return replyUsageChannel + "\n" + strings.TrimPrefix(text, noThreadLine)
	}
	team := cmd.TeamID
	if team == "" {
		if id, err := a.identity(ctx); err == nil {
			team = id.Team
		}
	}
	return a.usageReport(ctx, ThreadKey(team, cmd.ChannelID, "", "", true), "")
}

// plainUsage reports whether a message is a plain-text /usage this app
// answers: in a DM always; in a channel when it mentions the app (self), or
// for a "*" app when it mentions a bot or starts with "/" (an app per bot then
// answers only its own mention, so the person reads one answer).
func (a *Adapter) plainUsage(text string, dm, self bool) (bot string, ok bool) {
	handle, ok := usageCommand(text)
	if !ok {
		return "", false
	}
	if _, known := a.roster()[handle]; known && a.bot == "*" {
		bot = handle
	}
	switch {
	case dm || self:
		return bot, true
	case a.bot == "*":
		return bot, a.mentionsBot(text) || strings.HasPrefix(strings.TrimSpace(text), "/")
	}
	return "", false
}

// handleUsage answers a plain-text /usage message privately with the figures
// of the message's thread. Slack sends a mention twice (app_mention and
// message); the second copy is ignored.
func (a *Adapter) handleUsage(ctx context.Context, m message, dm bool, bot string) error {
	if !a.stops.first("usage:" + DedupKey(m.Team, m.Channel, m.TS)) {
		return nil
	}
	reply := a.usageReport(ctx, ThreadKey(m.Team, m.Channel, m.TS, m.ThreadTS, dm), bot)
	a.log.Info("slack /usage", "channel", m.Channel, "user", m.User)
	a.ephemeral(ctx, m.Channel, m.User, m.ThreadTS, reply)
	return nil
}
