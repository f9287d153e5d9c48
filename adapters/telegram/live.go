package telegram

import "time"

// IngressReady returns a channel that is closed once the account takes messages
// (DESIGN.md §9, the /healthz readiness check): in polling mode when the first
// getUpdates request is sent, in webhook mode when MountHTTP mounted its route.
// It is never closed for an account whose Run failed before that. Whether the
// ingress is still up later is IngressDown.
func (a *Adapter) IngressReady() <-chan struct{} { return a.ingress.Ready() }

// IngressDown says why the account's ingress does not take messages now, or ""
// when it does (or has not started: see IngressReady). In polling mode it is set
// while getUpdates fails and the poller backs off, and cleared by the next
// answer, so /healthz reflects the current state rather than the first success
// (DESIGN.md §9). Safe for concurrent use.
func (a *Adapter) IngressDown() string { return a.ingress.Down() }

// Pulse is when Telegram last answered this account's getUpdates (or, before
// the first answer, when polling started); the zero time in webhook mode or
// before Run polls. A polling account's pulse is at most PollTimeout old while
// the connection is healthy, so an older one means polling has stalled. Safe
// for concurrent use.
func (a *Adapter) Pulse() time.Time {
	if n := a.pulse.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Reconnect abandons the getUpdates request in flight, if any: the poller
// retries at once with a new request (after its usual backoff), as it does
// after a failed one. For a watchdog that sees the pulse stall. Safe for
// concurrent use.
func (a *Adapter) Reconnect() {
	if c := a.abandon.Load(); c != nil {
		(*c)()
	}
}

// LastPost is when Telegram last accepted a message this account sent or
// edited; the zero time before the first. Safe for concurrent use.
func (a *Adapter) LastPost() time.Time {
	if n := a.posted.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// RateLimited counts the 429 answers this account got since it started and
// the waits (retry_after) they asked for together. Safe for concurrent use.
func (a *Adapter) RateLimited() (answers int64, asked time.Duration) {
	return a.limited.Load(), time.Duration(a.limitedFor.Load())
}
