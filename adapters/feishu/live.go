package feishu

import "time"

// IngressReady returns a channel that is closed once the account takes events
// (DESIGN.md §9, the /healthz readiness check): with a long connection when the first
// websocket is established, in webhook mode when MountHTTP mounted its routes.
// It is never closed for an account whose Run failed before that.
func (a *Adapter) IngressReady() <-chan struct{} { return a.ingress.Ready() }

// IngressDown says why the account's ingress does not take messages now, or ""
// when it does (or has not started: see IngressReady): set while the long connection is down and reconnecting, cleared
// when it is back, so /healthz reflects the current state rather than the first
// success (DESIGN.md §9). An HTTP-mode account is never down. Safe for
// concurrent use.
func (a *Adapter) IngressDown() string { return a.ingress.Down() }

// Pulse is when the long connection last brought a frame (an event, a card
// click, or the pong to the ping sent every PingInterval, 120 s unless the
// server says otherwise), or when it was established or Run started before
// that; the zero time in webhook mode or before Run. Safe for concurrent use.
func (a *Adapter) Pulse() time.Time { return unixTime(a.pulse.Load()) }

// Reconnect ends the long connection of the moment, if any: a new one is made
// after the wait the server's ClientConfig asks for after a drop, as after a
// dropped connection; events not yet acked are redelivered. The adapter itself
// gives a connection up only after three ping periods without a pong; this is
// for a watchdog that sees the pulse stall sooner. Safe for concurrent use.
func (a *Adapter) Reconnect() {
	if c := a.abandon.Load(); c != nil {
		(*c)()
	}
}

// LastPost is when Feishu last accepted a message this account sent (create
// or reply) or a card it patched; the zero time before the first. Safe for
// concurrent use.
func (a *Adapter) LastPost() time.Time { return unixTime(a.api.posted.Load()) }

// RateLimited counts the answers that refused this account's Open API calls
// for frequency since it started (HTTP 429 or code 99991400, and the per-chat
// limit 230020), retried ones included, and the waits (x-ogw-ratelimit-reset)
// they asked for together. Safe for concurrent use.
func (a *Adapter) RateLimited() (answers int64, asked time.Duration) {
	return a.api.limited.Load(), time.Duration(a.api.limitedFor.Load())
}

// unixTime is n Unix nanoseconds, or the zero time for 0.
func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
