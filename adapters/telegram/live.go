package telegram

// IngressReady returns a channel that is closed once the account takes messages
// (DESIGN.md §9, the /healthz readiness check): in polling mode when the first
// getUpdates request is sent, in webhook mode when MountHTTP mounted its route.
// It is never closed for an account whose Run failed before that.
func (a *Adapter) IngressReady() <-chan struct{} { return a.live }

// markLive closes the IngressReady channel; later calls do nothing.
func (a *Adapter) markLive() { a.liveOnce.Do(func() { close(a.live) }) }
