// Package slacktest is a fake Slack for tests: an httptest server on 127.0.0.1 that
// the real slack-go client talks to through slack.OptionAPIURL(s.APIURL()). It
// answers the Web API methods openbot uses (auth.test, chat.postMessage, chat.update,
// chat.delete, chat.postEphemeral, users.info, reactions.add, reactions.remove,
// conversations.open, apps.connections.open, and the file download and external upload flow of
// files.go), runs a Socket Mode websocket endpoint that says hello and
// can push envelopes (events and block_actions clicks, see Click), records every
// call and every ack, refuses a message beyond Slack's limits as Slack does
// (invalid_blocks, msg_blocks_too_long, msg_too_long), and can be scripted to fail a method once (a 429 with
// Retry-After, an ok:false error). Payload shapes follow the fixtures in testdata (Slack's wire
// format, fixtures API_NOTES.md).
package slacktest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"openbot/adapters/internal/fakeserver"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Identities the fake answers with unless Options override them; they match the
// shared fixtures (team T0TEST, bot user U0TESTBOT).
const (
	DefaultTeam    = "T0TEST"
	DefaultBotUser = "U0TESTBOT"
	DefaultBotID   = "B0TESTBOT"
	DefaultAppID   = "A0TESTAPP"
)

// Options configures a Server. Zero values take the defaults above; empty tokens
// accept any token.
type Options struct {
	Team, BotUser, BotID, AppID string
	BotToken                    string // auth.test etc. answer invalid_auth for another token
	AppToken                    string // apps.connections.open answers invalid_auth for another token
	// Scopes, when set, are the bot token's granted OAuth scopes, sent as the
	// comma-separated x-oauth-scopes header of every Web API answer (as Slack
	// does); nil sends no header.
	Scopes []string
	// PingInterval is how often the websocket endpoint pings the client (slack-go
	// reconnects when no ping arrives for 30 s); default 5 s.
	PingInterval time.Duration
}

// Call is one recorded Web API request. Form holds the form fields (or, for a JSON
// request, nothing) with the token removed; JSON holds a JSON body.
type Call struct {
	Method string
	Form   url.Values
	JSON   json.RawMessage
	At     time.Time
}

// Ack is one Socket Mode acknowledgement the client sent.
type Ack struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// User is a workspace member users.info knows.
type User struct {
	ID          string
	Name        string // the legacy username
	RealName    string
	DisplayName string
	IsBot       bool
	// DM is the DM channel conversations.open answers for this user; default
	// "D" and the user id without its leading "U".
	DM string
}

// Message is a message as the fake holds it now: posted with chat.postMessage,
// changed by chat.update, gone after chat.delete.
type Message struct {
	Channel, TS, ThreadTS, Text string
	Edits                       int // chat.update calls that changed it
	// File and FileName are set for a file posted by files.completeUploadExternal.
	File, FileName string
}

// Messages returns the messages that exist now, in post order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, 0, len(s.msgs))
	for _, m := range s.msgs {
		out = append(out, *m)
	}
	return out
}

// findLocked returns the live message channel/ts, or nil.
func (s *Server) findLocked(channel, ts string) (int, *Message) {
	for i, m := range s.msgs {
		if m.Channel == channel && m.TS == ts {
			return i, m
		}
	}
	return -1, nil
}

type failure struct {
	skip       int // calls to let through first
	status     int
	slackErr   string
	retryAfter int // seconds; 0 = no header
}

// Server is the fake. All methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu       sync.Mutex
	changes  fakeserver.Changes // notified whenever calls, acks or conns change
	holds    fakeserver.Holds
	calls    []Call
	msgs     []*Message // posted and not deleted, in post order
	acks     []Ack
	users    map[string]User
	opened   map[string]bool // DM channels conversations.open answered
	fail     map[string][]failure
	seq      int
	conns    []*wsConn
	dialed   int
	closed   bool
	upgrader websocket.Upgrader
	files    map[string]File // served by AddFile (files.go)
	uploads  map[string]File // uploaded, not yet completed
}

type wsConn struct {
	c       *websocket.Conn
	writeMu sync.Mutex
	done    chan struct{}
	quiet   atomic.Bool // Silence: sends nothing more
}

// New starts a fake Slack on 127.0.0.1. Close it when done (t.Cleanup(s.Close)).
func New(opts Options) *Server {
	opts.Team = cmp.Or(opts.Team, DefaultTeam)
	opts.BotUser = cmp.Or(opts.BotUser, DefaultBotUser)
	opts.BotID = cmp.Or(opts.BotID, DefaultBotID)
	opts.AppID = cmp.Or(opts.AppID, DefaultAppID)
	if opts.PingInterval <= 0 {
		opts.PingInterval = 5 * time.Second
	}
	s := &Server{
		opts:  opts,
		users: map[string]User{},
		fail:  map[string][]failure{},
	}
	// slack-go dials with "Origin: https://api.slack.com", which gorilla's default
	// same-origin check refuses.
	s.upgrader.CheckOrigin = func(*http.Request) bool { return true }
	s.users[opts.BotUser] = User{ID: opts.BotUser, Name: "openbot", RealName: "openbot", IsBot: true}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/ws", s.serveWS)
	mux.HandleFunc("/files-pri/", s.serveFile)
	mux.HandleFunc("/upload/", s.serveUpload)
	s.srv = httptest.NewServer(mux)
	return s
}

// APIURL is the Web API base to pass to slack.OptionAPIURL: the server's URL + "/api/".
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// Close closes every websocket and stops the server; it waits for handlers.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.c.Close()
		<-c.done
	}
	s.srv.Close()
}

// DropConnections closes every open websocket without a disconnect frame, as a
// network failure would; the client is expected to reconnect.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.c.Close()
		<-c.done
	}
}

// Silence makes every open websocket go quiet without closing it, as one whose
// network path died silently does: no more pings, and Push passes it over.
// Connections made later behave as usual.
func (s *Server) Silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.quiet.Store(true)
	}
}

// AddUser makes users.info know u.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
}

// FailNext makes the next call of method fail once: with HTTP 429, a Retry-After of
// retryAfter (whole seconds) and {"ok":false,"error":"ratelimited"} when status is
// 429, else HTTP status with {"ok":false,"error":slackErr}. Calls queue up.
func (s *Server) FailNext(method string, status int, slackErr string, retryAfter time.Duration) {
	s.FailAfter(method, 0, status, slackErr, retryAfter)
}

// FailAfter is FailNext after letting skip calls of method succeed first.
func (s *Server) FailAfter(method string, skip, status int, slackErr string, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == http.StatusTooManyRequests && slackErr == "" {
		slackErr = "ratelimited"
	}
	s.fail[method] = append(s.fail[method], failure{skip: skip, status: status, slackErr: slackErr, retryAfter: int(retryAfter / time.Second)})
}

// Hold makes calls of method wait, after they are recorded, until release is
// called (or the client gives up), so a test can see what happens while a Web API
// call is in flight. release is idempotent.
func (s *Server) Hold(method string) (release func()) { return s.holds.Hold(method) }

// Calls returns a copy of every recorded Web API call, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the recorded calls of one method ("chat.postMessage").
func (s *Server) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Forget drops the calls and posted messages recorded so far, so a long load run
// (openbot bench) does not count the fake's record as the process's memory;
// later edits or deletes of forgotten messages are answered as for unknown ones.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.msgs = nil, nil
}

// Acks returns a copy of every Socket Mode ack received, oldest first.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// Wait blocks until cond returns true (checked after every recorded call, ack or
// connection change) or ctx is done, and returns ctx's error in that case.
func (s *Server) Wait(ctx context.Context, cond func(s *Server) bool) error {
	return s.changes.Wait(ctx, func() bool { return cond(s) })
}

// WaitCalls waits until method was called at least n times and returns those calls.
func (s *Server) WaitCalls(ctx context.Context, method string, n int) ([]Call, error) {
	err := s.Wait(ctx, func(s *Server) bool { return len(s.CallsTo(method)) >= n })
	return s.CallsTo(method), err
}

// WaitAck waits for the ack of one envelope.
func (s *Server) WaitAck(ctx context.Context, envelopeID string) (Ack, error) {
	var got Ack
	err := s.Wait(ctx, func(s *Server) bool {
		for _, a := range s.Acks() {
			if a.EnvelopeID == envelopeID {
				got = a
				return true
			}
		}
		return false
	})
	return got, err
}

// Connections reports how many websocket clients are connected now and how many
// connected in total.
func (s *Server) Connections() (open, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.dialed
}

// WaitConnected waits until a Socket Mode client is connected.
func (s *Server) WaitConnected(ctx context.Context) error {
	return s.Wait(ctx, func(s *Server) bool { open, _ := s.Connections(); return open > 0 })
}

// Push sends one raw frame to the newest connected Socket Mode client, waiting for
// a connection first. Use it for envelopes and for {"type":"disconnect",...}.
func (s *Server) Push(ctx context.Context, frame []byte) error {
	if err := s.WaitConnected(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	var c *wsConn
	for i := len(s.conns) - 1; i >= 0 && c == nil; i-- {
		if !s.conns[i].quiet.Load() {
			c = s.conns[i]
		}
	}
	s.mu.Unlock()
	if c == nil {
		return errors.New("slacktest: client went away")
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetWriteDeadline(dl)
		defer func() { _ = c.c.SetWriteDeadline(time.Time{}) }()
	}
	return c.c.WriteMessage(websocket.TextMessage, frame)
}

// PushEnvelope wraps payload (an Events API event_callback body, or an interactive
// payload) in a Socket Mode envelope of kind "events_api" or "interactive" and
// pushes it.
func (s *Server) PushEnvelope(ctx context.Context, kind, envelopeID string, payload json.RawMessage, retryAttempt int) error {
	env := map[string]any{
		"envelope_id":              envelopeID,
		"payload":                  payload,
		"type":                     kind,
		"accepts_response_payload": false,
	}
	if kind == "events_api" {
		env["retry_attempt"] = retryAttempt
		env["retry_reason"] = ""
		if retryAttempt > 0 {
			env["retry_reason"] = "timeout"
		}
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return s.Push(ctx, b)
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	wc := &wsConn{c: c, done: make(chan struct{})}
	hello := fmt.Sprintf(`{"type":"hello","num_connections":1,"debug_info":{"host":"applink-test-0001","build_number":42,"approximate_connection_time":18060},"connection_info":{"app_id":%q}}`, s.opts.AppID)
	if err := c.WriteMessage(websocket.TextMessage, []byte(hello)); err != nil {
		_ = c.Close()
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	s.conns = append(s.conns, wc) // registered after hello, so Push never overtakes it
	s.dialed++
	s.mu.Unlock()

	stopPing := make(chan struct{})
	pingDone := make(chan struct{})
	go func() { // owned by this handler; stopped below before it returns
		defer close(pingDone)
		t := time.NewTicker(s.opts.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-stopPing:
				return
			case <-t.C:
				if wc.quiet.Load() {
					continue
				}
				if c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) != nil {
					return
				}
			}
		}
	}()
	s.mu.Lock()
	s.changes.Notify()
	s.mu.Unlock()

	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			break
		}
		var a Ack
		if json.Unmarshal(data, &a) == nil && a.EnvelopeID != "" {
			s.mu.Lock()
			s.acks = append(s.acks, a)
			s.changes.Notify()
			s.mu.Unlock()
		}
	}
	close(stopPing)
	<-pingDone
	_ = c.Close()
	s.mu.Lock()
	for i, x := range s.conns {
		if x == wc {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			break
		}
	}
	s.changes.Notify()
	s.mu.Unlock()
	close(wc.done)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	call := Call{Method: method, At: time.Now()}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		call.JSON = json.RawMessage(body)
	} else {
		form, _ := url.ParseQuery(string(body))
		for k, v := range r.URL.Query() {
			form[k] = append(form[k], v...)
		}
		if t := form.Get("token"); t != "" {
			token = t
		}
		form.Del("token")
		call.Form = form
	}

	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.changes.Notify()
	var f *failure
	if q := s.fail[method]; len(q) > 0 {
		if q[0].skip > 0 {
			q[0].skip--
		} else {
			f = &q[0]
			s.fail[method] = q[1:]
		}
	}
	s.mu.Unlock()

	if !s.holds.Wait(r.Context(), method) {
		return
	}
	if s.opts.Scopes != nil && method != "apps.connections.open" {
		w.Header().Set("X-OAuth-Scopes", strings.Join(s.opts.Scopes, ","))
	}
	if f != nil {
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		}
		fakeserver.WriteJSON(w, f.status, map[string]any{"ok": false, "error": f.slackErr})
		return
	}
	want := s.opts.BotToken
	if method == "apps.connections.open" {
		want = s.opts.AppToken
	}
	if want != "" && token != want {
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if s.fileMethod(w, method, call) {
		return
	}
	if method == "chat.postMessage" || method == "chat.update" {
		if e := messageError(call.Form); e != "" {
			fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": e})
			return
		}
	}
	switch method {
	case "auth.test":
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{
			"ok": true, "url": "https://test-workspace.slack.com/", "team": "Test Workspace",
			"user": "openbot", "team_id": s.opts.Team, "user_id": s.opts.BotUser, "bot_id": s.opts.BotID,
		})
	case "apps.connections.open":
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws"})
	case "chat.postMessage":
		s.mu.Lock()
		s.seq++
		ts := fmt.Sprintf("1767300000.%06d", s.seq)
		s.mu.Unlock()
		msg := map[string]any{
			"user": s.opts.BotUser, "type": "message", "ts": ts, "bot_id": s.opts.BotID,
			"app_id": s.opts.AppID, "text": call.Form.Get("text"), "team": s.opts.Team,
		}
		if tt := call.Form.Get("thread_ts"); tt != "" {
			msg["thread_ts"] = tt
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, &Message{Channel: call.Form.Get("channel"), TS: ts, ThreadTS: call.Form.Get("thread_ts"), Text: call.Form.Get("text")})
		s.mu.Unlock()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": call.Form.Get("channel"), "ts": ts, "message": msg})
	case "chat.update":
		s.mu.Lock()
		if _, m := s.findLocked(call.Form.Get("channel"), call.Form.Get("ts")); m != nil && call.Form.Has("text") {
			m.Text = call.Form.Get("text")
			m.Edits++
		}
		s.mu.Unlock()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": call.Form.Get("channel"), "ts": call.Form.Get("ts"), "text": call.Form.Get("text")})
	case "chat.delete":
		s.mu.Lock()
		i, m := s.findLocked(call.Form.Get("channel"), call.Form.Get("ts"))
		if m != nil {
			s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
		}
		s.mu.Unlock()
		if m == nil {
			fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": call.Form.Get("channel"), "ts": call.Form.Get("ts")})
	case "chat.postEphemeral":
		s.mu.Lock()
		s.seq++
		ts := fmt.Sprintf("1767300000.%06d", s.seq)
		s.mu.Unlock()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "message_ts": ts})
	case "users.info":
		s.mu.Lock()
		u, ok := s.users[call.Form.Get("user")]
		s.mu.Unlock()
		if !ok {
			fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "user": map[string]any{
			"id": u.ID, "team_id": s.opts.Team, "name": u.Name, "real_name": u.RealName, "is_bot": u.IsBot,
			"profile": map[string]any{"real_name": u.RealName, "display_name": u.DisplayName},
		}})
	case "reactions.add", "reactions.remove":
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true})
	case "conversations.open":
		s.conversationsOpen(w, call.Form)
	default:
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// conversationsOpen answers conversations.open for one user (users=U…): the
// DM channel with the app's bot user, "D" and the user id without its "U" (or
// User.DM), {"ok":true,"channel":{"id":…}} as Slack answers without return_im,
// with "already_open" after the first time. Slack's refusals: missing_scope
// (when Scopes lack im:write), user_not_found, cannot_dm_bot; more than one
// user (a group DM) is not faked and answers not_implemented.
func (s *Server) conversationsOpen(w http.ResponseWriter, form url.Values) {
	if s.opts.Scopes != nil && !slices.Contains(s.opts.Scopes, "im:write") {
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "missing_scope", "needed": "im:write",
			"provided": strings.Join(s.opts.Scopes, ",")})
		return
	}
	users := strings.Split(form.Get("users"), ",")
	if len(users) != 1 || form.Get("channel") != "" {
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "not_implemented"})
		return
	}
	s.mu.Lock()
	u, ok := s.users[users[0]]
	dm := cmp.Or(u.DM, "D"+strings.TrimPrefix(u.ID, "U"))
	open := s.opened[dm]
	if ok && !u.IsBot {
		if s.opened == nil {
			s.opened = map[string]bool{}
		}
		s.opened[dm] = true
	}
	s.mu.Unlock()
	switch {
	case !ok:
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "user_not_found"})
	case u.IsBot:
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "cannot_dm_bot"})
	case open:
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "no_op": true, "already_open": true, "channel": map[string]any{"id": dm}})
	default:
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": map[string]any{"id": dm}})
	}
}

// Slack's limits on a posted or updated message, as it enforces them.
const (
	maxBlocks       = 50    // blocks in one message (invalid_blocks)
	maxSectionText  = 3000  // characters of a section's text (invalid_blocks)
	maxBlocksText   = 13000 // characters of all block text together (msg_blocks_too_long; measured, not documented)
	maxMessageChars = 40000 // characters of the text field (msg_too_long)
)

// messageError is the error Slack answers a message that breaks its limits
// with, or "" for one within them.
func messageError(form url.Values) string {
	if utf8.RuneCountInString(form.Get("text")) > maxMessageChars {
		return "msg_too_long"
	}
	raw := form.Get("blocks")
	if raw == "" {
		return ""
	}
	var blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Text string `json:"text"`
		} `json:"text"`
		Elements []struct {
			Text json.RawMessage `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil || len(blocks) > maxBlocks {
		return "invalid_blocks"
	}
	total := 0
	for _, b := range blocks {
		if b.Text != nil {
			n := utf8.RuneCountInString(b.Text.Text)
			if b.Type == "section" && n > maxSectionText {
				return "invalid_blocks"
			}
			total += n
		}
		for _, e := range b.Elements {
			var text string
			if json.Unmarshal(e.Text, &text) != nil {
				var obj struct{ Text string }
				_ = json.Unmarshal(e.Text, &obj)
				text = obj.Text
			}
			total += utf8.RuneCountInString(text)
		}
	}
	if total > maxBlocksText {
		return "msg_blocks_too_long"
	}
	return ""
}
