package slack

import (
	"context"

	"github.com/slack-go/slack"

	"openbot/core"
)

// usage answers /usage privately with the engine's report (core.UsageReporter,
// cost control): in a DM for its current thread, in a channel (where a slash
// command names no Slack thread) for the bot and all bots only.
func (a *Adapter) usage(ctx context.Context, cmd slack.SlashCommand) string {
	u, ok := a.engine.(core.UsageReporter)
	if !ok {
		return "Usage is not available here."
	}
	key := ""
	if isDMChannel(cmd.ChannelID, "") {
		team := cmd.TeamID
		if team == "" {
			if id, err := a.identity(ctx); err == nil {
				team = id.Team
			}
		}
		key = ThreadKey(team, cmd.ChannelID, "", "", true)
	}
	bot := ""
	if a.bot != "*" {
		bot = a.bot
	}
	text, err := u.UsageReport(ctx, key, bot)
	if err != nil {
		a.log.Warn("usage report", "err", err)
		return "Usage could not be read just now; try again."
	}
	return text
}
