package core

import "strings"

// TeamRoster is the "Bots on this team:" block of a chat adapter's /help: one
// line per bot, "@handle (Name): description", each part only when set.
func TeamRoster(bots []BotProfile) string {
	var b strings.Builder
	b.WriteString("Bots on this team:\n")
	for _, bot := range bots {
		b.WriteString("@" + bot.Handle)
		if bot.Name != "" && bot.Name != bot.Handle {
			b.WriteString(" (" + bot.Name + ")")
		}
		if bot.Description != "" {
			b.WriteString(": " + bot.Description)
		}
		b.WriteString("\n")
	}
	return b.String()
}
