package slack

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

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

// Pulse is when the Socket Mode websocket last brought anything (an envelope,
// hello, disconnect or Slack's websocket ping, which comes every few seconds
// while the connection is healthy), or when it was dialled or Run started
// before that; the zero time in http mode or before Run. Safe for concurrent
// use.
func (a *Adapter) Pulse() time.Time { return unixTime(a.pulse.Load()) }

// Reconnect ends the Socket Mode connection of the moment, if any: a new one is
// dialled after the usual backoff, as after a dropped connection; envelopes
// not yet acked are redelivered by Slack. slack-go itself redials a connection
// that brings no ping for 30 s; this is for a watchdog that sees the pulse stall
// for longer, whatever the cause. Safe for concurrent use.
func (a *Adapter) Reconnect() {
	if c := a.abandon.Load(); c != nil {
		(*c)()
	}
}

// LastPost is when Slack last accepted a chat.postMessage or chat.update this
// account sent; the zero time before the first. Safe for concurrent use.
func (a *Adapter) LastPost() time.Time { return unixTime(a.posted.Load()) }

// RateLimited counts the HTTP 429 answers Slack gave this account's Web API
// calls since it started (apps.connections.open included) and the waits
// (Retry-After) they asked for together. Safe for concurrent use.
func (a *Adapter) RateLimited() (answers int64, asked time.Duration) {
	return a.limited.Load(), time.Duration(a.limitedFor.Load())
}

// sent records that Slack accepted a post or an edit, for LastPost.
func (a *Adapter) sent() { a.posted.Store(time.Now().UnixNano()) }

// unixTime is n Unix nanoseconds, or the zero time for 0.
func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// pulseDialer is the Socket Mode websocket dialer (slack-go's defaults) whose
// connections record in a.pulse the time of every read that brings bytes: any
// frame, ping frames included, which slack-go handles without telling.
func (a *Adapter) pulseDialer() *websocket.Dialer {
	var d net.Dialer
	return &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 45 * time.Second,
		WriteBufferSize:  32 << 10,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			a.pulse.Store(time.Now().UnixNano())
			return pulseConn{Conn: c, pulse: &a.pulse}, nil
		},
	}
}

// pulseConn stores the time of each read that returned bytes in pulse.
type pulseConn struct {
	net.Conn
	pulse *atomic.Int64
}

func (c pulseConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.pulse.Store(time.Now().UnixNano())
	}
	return n, err
}

// limitCounter is the Web API's HTTP client: every call slack-go makes goes
// through its Do, so it sees every rate limit in one place. Slack's rate limit
// is an HTTP 429 with Retry-After in whole seconds, which slack-go returns as a
// *slack.RateLimitedError (a StatusCodeError when the header is missing); each
// adds one to limited and its Retry-After to limitedFor.
type limitCounter struct {
	c                   *http.Client
	limited, limitedFor *atomic.Int64
}

func (l limitCounter) Do(req *http.Request) (*http.Response, error) {
	res, err := l.c.Do(req)
	if err == nil && res.StatusCode == http.StatusTooManyRequests {
		l.limited.Add(1)
		if s, err := strconv.ParseInt(res.Header.Get("Retry-After"), 10, 64); err == nil && s > 0 {
			l.limitedFor.Add(s * int64(time.Second))
		}
	}
	return res, err
}
