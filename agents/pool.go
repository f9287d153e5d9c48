package agents

import "net/http"

// modelIdleConns is how many idle connections to one model server the agent
// keeps for reuse.
const modelIdleConns = 64

// modelTransport is the transport model calls use when Options.HTTPClient gives
// none: http.DefaultTransport's settings, but keeping up to modelIdleConns idle
// connections per host instead of 2 (max_concurrent_runs may be raised well past
// its default of 4). Runs in parallel each hold a connection for
// their streamed answer; with 2 kept, most of them closed their connection at the
// end and the next model call paid a new TCP (and TLS) handshake before its
// request (the event -> model request overhead of DESIGN.md §7).
var modelTransport http.RoundTripper = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = modelIdleConns
	t.MaxIdleConns = max(t.MaxIdleConns, 2*modelIdleConns)
	return t
}()
