package feishu

import (
	"context"

	"openbot/core"
)

// usageText is the answer to /usage (cost control, core.UsageAnswer) for the
// conversation's current thread and this account's bot.
func (a *Adapter) usageText(ctx context.Context, threadKey string) string {
	return core.UsageAnswer(ctx, a.engine, threadKey, a.bot, a.log)
}
