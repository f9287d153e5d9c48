package telegram

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
