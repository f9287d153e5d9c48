package telegram

import (
	"context"

	"openbot/core"
)

// usageText is the answer to /usage (cost control): the engine's report
// (core.UsageReporter) for the conversation's current thread and this
// account's bot (the thread's default bot on a "*" account).
func (a *Adapter) usageText(ctx context.Context, threadKey string) string {
	u, ok := a.engine.(core.UsageReporter)
	if !ok {
		return "Usage is not available here."
	}
	bot := ""
	if a.bot != "*" {
		bot = a.bot
	}
	text, err := u.UsageReport(ctx, threadKey, bot)
	if err != nil {
		a.log.Warn("usage report", "err", err)
		return "Usage could not be read just now; try again."
	}
	return text
}
