package console

import (
	"context"

	"openbot/core"
)

// usage prints the engine's report for /usage (core.UsageReporter, cost
// control): the current thread and its default bot, today and this month.
func (a *Adapter) usage(ctx context.Context) {
	u, ok := a.engine.(core.UsageReporter)
	if !ok {
		a.notice("usage is not available here")
		return
	}
	text, err := u.UsageReport(ctx, a.ThreadKey(), "")
	if err != nil {
		a.notice("usage could not be read: %v", err)
		return
	}
	a.notice("%s", text)
}
