package agents

import (
	"net/http"
	"time"
)

// modelIdleConns is how many idle connections to one model server the agent
// keeps for reuse, each for at most modelIdleTimeout.
const (
	modelIdleConns   = 16
	modelIdleTimeout = 30 * time.Second
)

// modelTransport is the transport model calls use when Options.HTTPClient gives
// none: http.DefaultTransport's settings, but keeping up to modelIdleConns idle
// connections per host instead of 2, for 30 s instead of 90. Runs in parallel each
// hold a connection for their streamed answer (over HTTP/1.1; HTTP/2 shares one);
// with 2 kept, most of them closed their connection at the end and the next model
// calls paid a new TCP (and TLS) handshake before their request (the event ->
// model request overhead of DESIGN.md §7). Each idle connection holds two buffers
// and two goroutines (about 20 KB), so the pool is bounded and let go a while
// after a burst (memory flat under bursts, DESIGN.md §9).
var modelTransport http.RoundTripper = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = modelIdleConns
	t.MaxIdleConns = max(t.MaxIdleConns, 4*modelIdleConns)
	t.IdleConnTimeout = modelIdleTimeout
	return t
}()
