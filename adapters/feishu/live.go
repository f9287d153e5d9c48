package feishu

// IngressReady returns a channel that is closed once the account takes events
// (DESIGN.md §9, the /healthz readiness check): with a long connection when the first
// websocket is established, in webhook mode when MountHTTP mounted its routes.
// It is never closed for an account whose Run failed before that.
func (a *Adapter) IngressReady() <-chan struct{} { return a.live }

// markLive closes the IngressReady channel; later calls do nothing.
func (a *Adapter) markLive() { a.liveOnce.Do(func() { close(a.live) }) }
