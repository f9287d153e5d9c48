package feishutest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"openbot/adapters/feishu"
	"openbot/adapters/internal/fakeserver"
)

// SetClientConfig sets the ClientConfig handed out with the endpoint and in pongs.
func (s *Server) SetClientConfig(c feishu.ClientConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = c
}

// FailEndpointNext answers the next long-connection discovery with code (HTTP 200),
// e.g. 1 (busy, retried) or 1000040350 (too many connections, a client error).
func (s *Server) FailEndpointNext(code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpointErr = &Failure{Code: code, Msg: msg}
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AppID     string `json:"AppID"`
		AppSecret string `json:"AppSecret"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.AppID != AppID || req.AppSecret != AppSecret {
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 1000040351, "msg": "invalid app credentials (fake)", "data": nil})
		return
	}
	s.mu.Lock()
	f := s.endpointErr
	s.endpointErr = nil
	cfg := s.config
	n := s.connCount + 1
	s.mu.Unlock()
	if f != nil {
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": f.Code, "msg": f.Msg, "data": nil})
		return
	}
	url := fmt.Sprintf("ws://%s/ws/v2?fpid=493&aid=552564&device_id=74%017d&access_key=TESTaccessKey0001&service_id=%d&ticket=TESTticket-%04d",
		r.Host, n, ServiceID, n)
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{"URL": url, "ClientConfig": cfg}})
}

func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") == "" || r.URL.Query().Get("service_id") != strconv.Itoa(ServiceID) {
		w.Header().Set("Handshake-Status", "403")
		w.Header().Set("Handshake-Msg", "forbidden (fake)")
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(4 << 20)
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.connCount++
	s.changes.Notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for i, x := range s.conns {
			if x == c {
				s.conns = append(s.conns[:i], s.conns[i+1:]...)
				break
			}
		}
		delete(s.silent, c)
		s.changes.Notify()
		s.mu.Unlock()
		c.CloseNow()
	}()
	ctx := r.Context()
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageBinary {
			continue
		}
		f, err := feishu.UnmarshalFrame(b)
		if err != nil {
			continue
		}
		switch {
		case f.Method == feishu.FrameControl && f.Header("type") == "ping":
			s.mu.Lock()
			if s.silent[c] {
				s.mu.Unlock()
				continue
			}
			s.pings++
			cfg := s.config
			s.changes.Notify()
			s.mu.Unlock()
			payload, _ := json.Marshal(cfg)
			pong := feishu.Frame{Service: f.Service, Method: feishu.FrameControl, Headers: []feishu.Header{{Key: "type", Value: "pong"}}, Payload: payload}
			if err := c.Write(ctx, websocket.MessageBinary, pong.Marshal()); err != nil {
				return
			}
		case f.Method == feishu.FrameData:
			var p struct {
				Code int    `json:"code"`
				Data []byte `json:"data"` // base64 in JSON
			}
			_ = json.Unmarshal(f.Payload, &p)
			s.mu.Lock()
			s.acks = append(s.acks, Ack{Frame: f, Code: p.Code, Payload: string(f.Payload), Data: p.Data})
			s.changes.Notify()
			s.mu.Unlock()
		}
	}
}

// Connections is how many long connections were accepted so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connCount
}

// WaitConnections waits until n long connections were accepted in total and the
// latest is still open.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	return s.wait(ctx, fmt.Sprintf("%d connections", n), func() bool { return s.connCount >= n && len(s.conns) > 0 })
}

// WaitDisconnected waits until no long connection is open.
func (s *Server) WaitDisconnected(ctx context.Context) error {
	return s.wait(ctx, "no open connection", func() bool { return len(s.conns) == 0 })
}

// Pings is how many pings the clients sent.
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// WaitPings waits until n pings were received in total.
func (s *Server) WaitPings(ctx context.Context, n int) error {
	return s.wait(ctx, fmt.Sprintf("%d pings", n), func() bool { return s.pings >= n })
}

// Acks returns the data-frame acknowledgements received so far.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// WaitAcks waits until n acks were received in total and returns them all.
func (s *Server) WaitAcks(ctx context.Context, n int) ([]Ack, error) {
	err := s.wait(ctx, fmt.Sprintf("%d acks", n), func() bool { return len(s.acks) >= n })
	return s.Acks(), err
}

// DropConnections closes every open long connection abruptly, as a network failure
// or a server restart does.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.changes.Notify()
	s.mu.Unlock()
	for _, c := range conns {
		c.CloseNow()
	}
}

// Silence makes every open long connection go quiet without closing it, as one
// whose network path died silently does: its pings get no pong (and are not
// counted). Connections made later behave as usual.
func (s *Server) Silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		s.silent[c] = true
	}
}

// PushEvent sends payload (an event envelope JSON) on the newest long connection as
// a type=event data frame, split into parts fragments (sum/seq headers, sent in
// order) when parts > 1. It returns the frames' message_id header.
func (s *Server) PushEvent(ctx context.Context, payload []byte, parts int) (string, error) {
	return s.pushData(ctx, payload, parts, "event")
}

// PushCard sends a card callback payload (a card.action.trigger envelope, see
// CardAction.JSON) on the newest long connection as one data frame of frameType
// "event" (the official SDKs' path) or "card" (what third-party bridges report),
// and returns the frame's message_id header, for WaitAck.
func (s *Server) PushCard(ctx context.Context, payload []byte, frameType string) (string, error) {
	return s.pushData(ctx, payload, 1, frameType)
}

// WaitAck waits for the ack of the data frame with the message_id header id.
func (s *Server) WaitAck(ctx context.Context, id string) (Ack, error) {
	var got Ack
	err := s.wait(ctx, "ack of "+id, func() bool {
		for _, a := range s.acks {
			if a.Frame.Header("message_id") == id {
				got = a
				return true
			}
		}
		return false
	})
	return got, err
}

func (s *Server) pushData(ctx context.Context, payload []byte, parts int, typ string) (string, error) {
	parts = max(parts, 1)
	s.mu.Lock()
	s.frameSeq++
	seq := s.frameSeq
	s.mu.Unlock()
	id := fmt.Sprintf("TESTmsg-%04d-ws", seq)
	size := (len(payload) + parts - 1) / parts
	for i := range parts {
		lo, hi := min(i*size, len(payload)), min((i+1)*size, len(payload))
		f := feishu.Frame{
			SeqID: seq*100 + uint64(i), LogID: 7380000000000000000 + seq, Service: ServiceID, Method: feishu.FrameData,
			Headers: []feishu.Header{{Key: "type", Value: typ}, {Key: "message_id", Value: id},
				{Key: "sum", Value: strconv.Itoa(parts)}, {Key: "seq", Value: strconv.Itoa(i)}, {Key: "trace_id", Value: "TESTtrace-" + id}},
			Payload: append([]byte{}, payload[lo:hi]...),
		}
		if err := s.PushFrame(ctx, f); err != nil {
			return "", err
		}
	}
	return id, nil
}

// PushFrame sends one raw frame on the newest long connection.
func (s *Server) PushFrame(ctx context.Context, f feishu.Frame) error {
	s.mu.Lock()
	var c *websocket.Conn
	if len(s.conns) > 0 {
		c = s.conns[len(s.conns)-1]
	}
	s.mu.Unlock()
	if c == nil {
		return ErrNoConnection
	}
	return c.Write(ctx, websocket.MessageBinary, f.Marshal())
}
