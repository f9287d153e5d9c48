package slack

import (
	"strings"

	"openbot/core"
)

// refuse logs a malformed or refused platform request at WARN (the house rule for
// bad input: logged and acknowledged, nothing else happens). The line carries the
// account (from the adapter's logger), the reason and the given attributes, which
// callers keep free of payloads and secrets: ids, paths, error values of parsing
// or verification, never a body, a token or the signing secret.
//
// It also counts the request for metrics (core.ReportInbound): "refused" for an
// allow-list or authorization refusal, "dropped" for anything malformed or not
// for openbot.
func (a *Adapter) refuse(reason string, attrs ...any) {
	a.log.Warn("slack request refused", append([]any{"reason", reason}, attrs...)...)
	core.ReportInbound(a.engine, "slack", refusalOutcome(reason))
}

// refusalOutcome sorts a refuse reason into an inbound metrics outcome.
func refusalOutcome(reason string) string {
	for _, w := range []string{"allow list", "signature", "timestamp", "may not answer"} {
		if strings.Contains(reason, w) {
			return core.InboundRefused
		}
	}
	return core.InboundDropped
}
