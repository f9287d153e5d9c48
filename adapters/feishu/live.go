package feishu

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
