package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"openbot/internal/keyed"

	"openbot/internal/waitctx"
)

// ClientConfig is the long-connection tuning the server sends with the endpoint and
// in pongs; every value is in seconds (LONG_CONNECTION.md §1).
type ClientConfig struct {
	ReconnectCount    int `json:"ReconnectCount"`    // -1: retry forever
	ReconnectInterval int `json:"ReconnectInterval"` // wait between attempts
	ReconnectNonce    int `json:"ReconnectNonce"`    // max random jitter before reconnecting
	PingInterval      int `json:"PingInterval"`      // ping period
}

// defaultClientConfig is the SDK's before the server says otherwise.
var defaultClientConfig = ClientConfig{ReconnectCount: -1, ReconnectInterval: 120, ReconnectNonce: 30, PingInterval: 120}

// clientError is a long-connection failure that retrying cannot fix (bad
// credentials, no permission, too many connections): Run stops with it.
type clientError struct{ err error }

func (e clientError) Error() string { return e.err.Error() }
func (e clientError) Unwrap() error { return e.err }

const (
	wsDialTimeout  = 10 * time.Second
	wsWriteTimeout = 5 * time.Second
	wsReadLimit    = 4 << 20
	fragmentTTL    = 5 * time.Second
	maxFragmentSet = 64
	// maxReconnectBackoff caps the doubling wait between failed attempts.
	maxReconnectBackoff = 2 * time.Minute
)

// runLongConnection keeps one long connection up until ctx is done
// (LONG_CONNECTION.md §7): every attempt discovers a fresh endpoint and dials it;
// after a connection drops it waits a random 0..ReconnectNonce s, after a failed
// attempt it backs off (doubling from 1 s up to ReconnectInterval, plus jitter).
// Client errors stop it with an error; ReconnectCount >= 0 bounds consecutive
// failures. Pulse starts from when it is called.
func (a *Adapter) runLongConnection(ctx context.Context) error {
	a.pulse.Store(time.Now().UnixNano())
	cfg := defaultClientConfig
	failures := 0
	for {
		connected, err := a.session(ctx, &cfg)
		if ctx.Err() != nil {
			return nil
		}
		var ce clientError
		if errors.As(err, &ce) {
			a.log.Error("feishu long connection refused for good", "err", err)
			return err
		}
		var wait time.Duration
		if connected {
			failures = 0
			a.log.Warn("feishu long connection dropped; reconnecting", "err", err)
			wait = jitter(time.Duration(cfg.ReconnectNonce) * time.Second)
		} else {
			failures++
			if cfg.ReconnectCount >= 0 && failures > cfg.ReconnectCount {
				return fmt.Errorf("feishu: long connection failed %d times: %w", failures, err)
			}
			back := min(time.Second<<min(failures-1, 16), maxReconnectBackoff, time.Duration(cfg.ReconnectInterval)*time.Second)
			wait = back + jitter(back/2)
			a.log.Warn("feishu long connection attempt failed", "err", err, "failures", failures, "wait", wait)
		}
		if err := waitctx.Sleep(ctx, max(wait, a.reconnectFloor)); err != nil {
			return nil
		}
	}
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// endpoint discovers the websocket URL with the app credentials (LONG_CONNECTION.md
// §1): POST {base}/callback/ws/endpoint {"AppID","AppSecret"}.
func (a *Adapter) endpoint(ctx context.Context) (string, *ClientConfig, error) {
	var resp struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
		Data *struct {
			URL          string        `json:"URL"`
			ClientConfig *ClientConfig `json:"ClientConfig"`
		} `json:"data"`
	}
	body := map[string]string{"AppID": a.api.appID, "AppSecret": a.api.appSecret}
	err := a.api.doJSONHeaders(ctx, "ws.endpoint", "/callback/ws/endpoint", map[string]string{"locale": "zh"}, body, &resp)
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.HTTPStatus == http.StatusOK && ae.Code != CodeSystemBusy && ae.Code != CodeEndpointInternal {
			return "", nil, clientError{err}
		}
		return "", nil, err
	}
	if err != nil {
		return "", nil, err
	}
	if resp.Data == nil || resp.Data.URL == "" {
		return "", nil, errors.New("feishu: ws.endpoint: no URL in response")
	}
	return resp.Data.URL, resp.Data.ClientConfig, nil
}

// redact drops the query (access_key, ticket) of a websocket URL for logs.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	if id := u.Query().Get("device_id"); id != "" {
		c.RawQuery = "device_id=" + id
	}
	return c.String()
}

// session runs one connection: discovery, dial, then a reader, a pinger and
// serialized writes until the connection fails or ctx is done. connected reports
// whether the websocket was established.
func (a *Adapter) session(ctx context.Context, cfg *ClientConfig) (connected bool, err error) {
	rawURL, cc, err := a.endpoint(ctx)
	if err != nil {
		return false, err
	}
	if cc != nil {
		*cfg = *cc
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, fmt.Errorf("feishu: ws.endpoint: bad URL: %w", err)
	}
	sid, err := strconv.ParseInt(u.Query().Get("service_id"), 10, 32)
	if err != nil {
		return false, fmt.Errorf("feishu: ws.endpoint: bad service_id: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	conn, res, err := websocket.Dial(dctx, rawURL, &websocket.DialOptions{HTTPClient: a.http})
	cancel()
	if err != nil {
		if res != nil {
			status, auth := res.Header.Get("Handshake-Status"), res.Header.Get("Handshake-Autherrcode")
			if status == "403" || (status == "514" && auth == strconv.Itoa(CodeEndpointTooMany)) {
				return false, clientError{fmt.Errorf("feishu: long connection refused: status %s auth %s: %s", status, auth, res.Header.Get("Handshake-Msg"))}
			}
		}
		return false, fmt.Errorf("feishu: dialing %s: %w", redact(u), err)
	}
	conn.SetReadLimit(wsReadLimit)
	sctx, abandon := context.WithCancel(ctx) // Reconnect ends the session from here on
	defer abandon()
	a.abandon.Store(&abandon)
	defer a.abandon.CompareAndSwap(&abandon, nil)
	a.pulse.Store(time.Now().UnixNano())
	a.log.Info("feishu long connection up", "url", redact(u))
	a.ingress.SetDown("")
	a.ingress.MarkLive()
	s := &wsSession{a: a, conn: conn, service: int32(sid), frags: map[string]*fragSet{}, pingEvery: make(chan time.Duration, 1),
		work: keyed.New(wsParallel)}
	err = s.run(sctx, time.Duration(cfg.PingInterval)*time.Second, cfg)
	a.ingress.SetDown("long connection down; reconnecting")
	return true, err
}

// wsSession is one established long connection.
type wsSession struct {
	a       *Adapter
	conn    *websocket.Conn
	service int32

	writeMu sync.Mutex // one writer at a time (LONG_CONNECTION.md §5)

	frags     map[string]*fragSet // reader goroutine only
	pingEvery chan time.Duration  // new ping period from a pong; cap 1
	lastPong  atomic.Int64        // unix nanoseconds of the last pong (or connect)
	// work handles complete payloads: in order within a chat, concurrently across
	// chats; run waits for it before returning.
	work *keyed.Group
}

type fragSet struct {
	parts   [][]byte
	got     int
	updated time.Time
}

func (s *wsSession) write(ctx context.Context, f Frame) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageBinary, f.Marshal())
}

// run reads frames until the connection fails or ctx is done, with a pinger
// goroutine and the event handlers (s.work), which it stops and waits for before
// returning.
func (s *wsSession) run(ctx context.Context, ping time.Duration, cfg *ClientConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.pinger(ctx, ping); err != nil && ctx.Err() == nil {
			s.a.log.Warn("feishu ping failed", "err", err)
			s.conn.CloseNow()
		}
	}()
	err := s.readLoop(ctx, cfg)
	cancel()
	s.work.Wait()
	wg.Wait()
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		s.conn.Close(websocket.StatusNormalClosure, "")
	} else {
		s.conn.CloseNow()
	}
	return err
}

// errNoPong is returned by the pinger when the server stopped answering pings.
var errNoPong = errors.New("feishu: no pong for 3 ping intervals")

// pinger sends a ping right away and then every period, which a pong may change. A
// connection with no pong for 3 periods is treated as dead (LONG_CONNECTION.md §4).
func (s *wsSession) pinger(ctx context.Context, period time.Duration) error {
	if period <= 0 {
		period = time.Duration(defaultClientConfig.PingInterval) * time.Second
	}
	s.lastPong.Store(time.Now().UnixNano())
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if time.Since(time.Unix(0, s.lastPong.Load())) > 3*period {
			return errNoPong
		}
		if err := s.write(ctx, pingFrame(s.service)); err != nil {
			return err
		}
	wait: // until the period is up; a pong's new period only resets the ticker
		for {
			select {
			case <-ctx.Done():
				return nil
			case p := <-s.pingEvery:
				if p > 0 && p != period {
					period = p
					t.Reset(p)
				}
			case <-t.C:
				break wait
			}
		}
	}
}

func (s *wsSession) readLoop(ctx context.Context, cfg *ClientConfig) error {
	for {
		typ, b, err := s.conn.Read(ctx)
		if err != nil {
			return err
		}
		s.a.pulse.Store(time.Now().UnixNano())
		if typ != websocket.MessageBinary {
			s.a.log.Debug("feishu text websocket message ignored")
			continue
		}
		f, err := UnmarshalFrame(b)
		if err != nil {
			s.a.log.Warn("feishu bad frame ignored", "err", err)
			continue
		}
		switch f.Method {
		case FrameControl:
			if f.Header("type") == "pong" {
				s.lastPong.Store(time.Now().UnixNano())
			}
			if f.Header("type") == "pong" && len(f.Payload) > 0 {
				var cc ClientConfig
				if err := json.Unmarshal(f.Payload, &cc); err == nil {
					*cfg = cc
					select {
					case s.pingEvery <- time.Duration(cc.PingInterval) * time.Second:
					default:
					}
				}
			}
		case FrameData:
			if err := s.data(ctx, f); err != nil {
				return err
			}
		}
	}
}

// data reassembles a data frame's payload (LONG_CONNECTION.md §6) and, once
// complete, hands it to s.work keyed by its chat: payloads of one chat are handled
// in arrival order, of different chats concurrently, so events that arrive
// together share store commits. It returns ctx's error when ctx ended while
// waiting for room.
func (s *wsSession) data(ctx context.Context, f Frame) error {
	payload := s.reassemble(f)
	if payload == nil {
		return nil
	}
	start := time.Now()
	if !s.work.Go(ctx, payloadKey(payload), func() {
		if err := s.handle(ctx, f, payload, start); err != nil && ctx.Err() == nil {
			// The connection is broken: closing it ends the read loop, and the
			// session reconnects; the unacked event is redelivered.
			s.a.log.Warn("feishu ack not sent", "err", err)
			s.conn.CloseNow()
		}
	}) {
		return ctx.Err()
	}
	return nil
}

// handle handles one complete payload and acks the frame that completed it only
// after that: code 200 when handled (stored, when it is a message), 500 when the
// event should be redelivered. Frames of type "event" and "card" are handled
// alike, dispatched on the payload. Only a failed write is returned.
func (s *wsSession) handle(ctx context.Context, f Frame, payload []byte, start time.Time) error {
	code := 200
	var (
		env  envelope
		data []byte
	)
	switch err := json.Unmarshal(payload, &env); {
	case err != nil:
		s.a.log.Warn("feishu long-connection payload is not JSON; acking", "err", err)
	case isCardAction(&env):
		// A card click (DESIGN.md §5): the response (a toast) goes into the ack of a
		// type=event frame; a type=card frame is acked without data, as responses
		// there are reported to fail (LONG_CONNECTION.md §5), and the card is
		// updated by ResolveQuestion either way.
		resp := s.a.cardAction(ctx, &env)
		if f.Header("type") != "card" {
			data, _ = json.Marshal(resp)
		}
	default:
		if err := s.a.handleEvent(ctx, &env); err != nil {
			s.a.log.Warn("feishu event not handled; the platform will redeliver", "event_id", env.Header.EventID, "err", err)
			code = 500
		}
	}
	return s.write(ctx, ackFrame(f, code, data, time.Since(start).Milliseconds()))
}

// reassemble returns the complete payload once every fragment of f's message has
// arrived, else nil. Incomplete sets older than fragmentTTL are dropped, and at most
// maxFragmentSet are kept.
func (s *wsSession) reassemble(f Frame) []byte {
	sum, _ := strconv.Atoi(f.Header("sum"))
	if sum <= 1 {
		return f.Payload
	}
	seq, err := strconv.Atoi(f.Header("seq"))
	if err != nil || seq < 0 || seq >= sum {
		s.a.log.Warn("feishu fragment with bad seq dropped", "seq", f.Header("seq"), "sum", sum)
		return nil
	}
	now := s.a.clock.Now()
	for id, fs := range s.frags {
		if now.Sub(fs.updated) > fragmentTTL {
			delete(s.frags, id)
		}
	}
	id := f.Header("message_id")
	fs := s.frags[id]
	if fs == nil || len(fs.parts) != sum {
		if len(s.frags) >= maxFragmentSet {
			s.a.log.Warn("feishu too many partial messages; dropping", "message_id", id)
			return nil
		}
		fs = &fragSet{parts: make([][]byte, sum)}
		s.frags[id] = fs
	}
	fs.updated = now
	if fs.parts[seq] == nil {
		fs.parts[seq] = append([]byte{}, f.Payload...)
		fs.got++
	}
	if fs.got < sum {
		return nil
	}
	delete(s.frags, id)
	var out []byte
	for _, p := range fs.parts {
		out = append(out, p...)
	}
	return out
}
