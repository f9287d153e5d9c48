package slack

// IngressReady returns a channel that is closed once the account takes events
// (DESIGN.md §9, the /healthz readiness check): in socket mode when Slack sent
// hello on the first connection, in http mode when MountHTTP mounted its routes.
// It is never closed for an account whose Run failed before that.
func (a *Adapter) IngressReady() <-chan struct{} { return a.ingress.Ready() }

// IngressDown says why the account's ingress does not take messages now, or ""
// when it does (or has not started: see IngressReady): set while the Socket Mode connection is down and reconnecting, cleared
// when it is back, so /healthz reflects the current state rather than the first
// success (DESIGN.md §9). An HTTP-mode account is never down. Safe for
// concurrent use.
func (a *Adapter) IngressDown() string { return a.ingress.Down() }
