// Package feishutest is a fake Feishu/Lark Open API server for tests ("Tests
// that must exist"): an httptest server on 127.0.0.1 that speaks the real wire
// protocol, so the adapter's real client code runs against it. It serves
//
//   - POST /open-apis/auth/v3/tenant_access_token/internal
//   - POST /open-apis/im/v1/messages?receive_id_type=...   (create; to an open_id it
//     answers the person's p2p chat, P2PChatOf)
//   - POST /open-apis/im/v1/messages/:id/reply
//   - PATCH /open-apis/im/v1/messages/:id                  (card update, recorded)
//   - DELETE /open-apis/im/v1/messages/:id                 (recall)
//   - POST /open-apis/im/v1/messages/:id/reactions         (add a reaction)
//   - DELETE /open-apis/im/v1/messages/:id/reactions/:rid  (remove it)
//   - GET  /open-apis/bot/v3/info
//   - GET  /open-apis/contact/v3/users/:open_id            (Alice and Bob only)
//   - POST /callback/ws/endpoint                          (long-connection discovery)
//   - GET  /ws/v2                                         (websocket with pbbp2 frames)
//
// records every call, refuses a card over Feishu's 30 KB (MaxCardBody), and can
// be scripted: tokens invalidated, one-shot errors
// (rate limits, rejected cards), events and card clicks pushed over the long
// connection (fragmented too), connections dropped. It also builds webhook requests
// (plain, or encrypted and signed, or legacy card callbacks signed with the
// verification token), message events and card actions for the adapter's HTTP
// handlers, and reads the buttons of the cards the adapter sent.
package feishutest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"openbot/adapters/feishu"
	"openbot/adapters/internal/fakeserver"
)

// Fixture identities (shared/fixtures/README.md "Identities").
const (
	AppID             = "cli_a0b1c2d3e4f5a6b7"
	AppSecret         = "TESTappSecret0000000000000000001"
	VerificationToken = "TESTverificationToken00000000001"
	EncryptKey        = "TESTencryptKey000000000000000001"
	BotOpenID         = "ou_fc1452416cb8c3d31fb471049ce3a074"
	BotName           = "Bridge Bot"
	AliceOpenID       = "ou_2bd806c97f0e00af1a1fc3328fa763a9"
	BobOpenID         = "ou_81b637d8fcd2c6da6359e6963113a117"
	GroupChat         = "oc_5fc90c2dcb8cb0a515bc34c4552b2895"
	P2PChat           = "oc_ca92fff76249e5680de3669b4880557c"
	ServiceID         = 33554678
)

// P2PChatOf is the chat_id of the p2p chat between the app and the person with
// openID, as the fake answers a message sent to the person (receive_id_type
// open_id): P2PChat for Alice, "oc_p2p_" and the open_id's rest for others.
func P2PChatOf(openID string) string {
	if openID == AliceOpenID {
		return P2PChat
	}
	return "oc_p2p_" + strings.TrimPrefix(openID, "ou_")
}

// Call is one recorded HTTP request.
type Call struct {
	Method string
	Path   string
	Query  string
	Auth   string // Authorization header
	Body   []byte
	At     time.Time // when it arrived
}

// Message is one message the adapter sent (create or reply).
type Message struct {
	ID        string
	Kind      string // "create" or "reply"
	ReplyTo   string // reply: the message replied to
	InThread  bool   // reply: reply_in_thread
	ReceiveID string // create: receive_id
	IDType    string // create: receive_id_type
	MsgType   string // "text", "interactive", ...
	Content   string // the content JSON string
	UUID      string
	ThreadID  string // the topic thread the reply went into
}

// Text returns what a person would read: the text of a text message, or the content
// of the first markdown element of a card.
func (m Message) Text() string {
	var c struct {
		Text string `json:"text"`
		Body struct {
			Elements []struct {
				Tag     string `json:"tag"`
				Content string `json:"content"`
			} `json:"elements"`
		} `json:"body"`
	}
	_ = json.Unmarshal([]byte(m.Content), &c)
	if m.MsgType == "interactive" {
		for _, e := range c.Body.Elements {
			if e.Tag == "markdown" {
				return e.Content
			}
		}
	}
	return c.Text
}

// Failure is a scripted error answered once to the next matching request.
type Failure struct {
	Method     string // "" matches any
	PathPrefix string // e.g. "/open-apis/im/v1/messages"
	Status     int    // HTTP status; default 400
	Code       int
	Msg        string
	Header     map[string]string // e.g. x-ogw-ratelimit-reset
}

// Ack is one data-frame acknowledgement the client sent.
type Ack struct {
	Frame   feishu.Frame
	Code    int
	Payload string
	// Data is the decoded (base64) callback response of a card action's ack, nil
	// when the ack carried none.
	Data []byte
}

// Server is the fake. Create it with New; it is closed by the test's cleanup.
type Server struct {
	srv *httptest.Server

	mu          sync.Mutex
	changes     fakeserver.Changes // notified on every recorded change
	calls       []Call
	messages    []Message
	tokens      map[string]bool
	tokenSeq    int
	msgSeq      int
	uuids       map[string]string
	threads     map[string]string // message id -> thread id
	failures    []Failure
	config      feishu.ClientConfig
	endpointErr *Failure
	conns       []*websocket.Conn
	silent      map[*websocket.Conn]bool // Silence: no pongs
	connCount   int
	pings       int
	acks        []Ack
	frameSeq    uint64
	patches     []Patch
	deleted     map[string]bool       // message ids recalled with DELETE
	reactions   map[string][]Reaction // live reactions by message id
	reactionSeq int
	resources   map[string]string // "<message id>/<key>" -> content (files.go)
	uploads     map[string]Upload // by image_key or file_key
}

// Reaction is an emoji reaction the app put on a message and has not removed.
type Reaction struct {
	ID        string
	MessageID string
	EmojiType string
}

// New starts a fake on 127.0.0.1 and closes it when tb ends. The long-connection
// ClientConfig it hands out pings every 60 s and reconnects immediately (0 s
// interval and jitter) so tests do not wait; change it with SetClientConfig.
func New(tb interface {
	Cleanup(func())
	Helper()
}) *Server {
	tb.Helper()
	s := &Server{
		tokens:  map[string]bool{},
		uuids:   map[string]string{},
		threads: map[string]string{},
		silent:  map[*websocket.Conn]bool{},
		config:  feishu.ClientConfig{ReconnectCount: -1, ReconnectInterval: 0, ReconnectNonce: 0, PingInterval: 60},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", s.token)
	mux.HandleFunc("POST /open-apis/im/v1/messages", s.create)
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reply", s.reply)
	mux.HandleFunc("PATCH /open-apis/im/v1/messages/{id}", s.patch)
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}", s.recall)
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reactions", s.addReaction)
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}/reactions/{rid}", s.removeReaction)
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", s.resource) // files.go
	mux.HandleFunc("POST /open-apis/im/v1/images", s.uploadHandler("image"))
	mux.HandleFunc("POST /open-apis/im/v1/files", s.uploadHandler("file"))
	mux.HandleFunc("GET /open-apis/bot/v3/info", s.botInfo)
	mux.HandleFunc("GET /open-apis/contact/v3/users/{id}", s.user)
	mux.HandleFunc("POST /callback/ws/endpoint", s.endpoint)
	mux.HandleFunc("GET /ws/v2", s.ws)
	s.srv = httptest.NewServer(s.record(mux))
	tb.Cleanup(s.Close)
	return s
}

// URL is the fake's base URL, for feishu.Options.BaseURL.
func (s *Server) URL() string { return s.srv.URL }

// Close drops every websocket and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.CloseNow()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// wait checks cond (called with s.mu held) after every change until it is true
// or ctx is done.
func (s *Server) wait(ctx context.Context, what string, cond func() bool) error {
	err := s.changes.Wait(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	})
	if err != nil {
		return fmt.Errorf("feishutest: waiting for %s: %w", what, err)
	}
	return nil
}

func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: body, At: time.Now()})
		f := s.takeFailure(r)
		s.changes.Notify()
		s.mu.Unlock()
		if f != nil {
			for k, v := range f.Header {
				w.Header().Set(k, v)
			}
			status := cmp.Or(f.Status, http.StatusBadRequest)
			fakeserver.WriteJSON(w, status, map[string]any{"code": f.Code, "msg": f.Msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// takeFailure removes and returns the first scripted failure matching r; s.mu held.
func (s *Server) takeFailure(r *http.Request) *Failure {
	for i, f := range s.failures {
		if (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.Path, f.PathPrefix) {
			s.failures = append(s.failures[:i], s.failures[i+1:]...)
			return &f
		}
	}
	return nil
}

// FailNext makes the next request matching f fail once with f's status and code.
func (s *Server) FailNext(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f)
}

// RateLimitNext answers the next request under pathPrefix with HTTP 429, code
// 99991400 and x-ogw-ratelimit-reset: resetSeconds.
func (s *Server) RateLimitNext(pathPrefix string, resetSeconds int) {
	s.FailNext(Failure{PathPrefix: pathPrefix, Status: http.StatusTooManyRequests, Code: feishu.CodeRateLimited,
		Msg: "request trigger frequency limit", Header: map[string]string{"x-ogw-ratelimit-limit": "50", "x-ogw-ratelimit-reset": strconv.Itoa(resetSeconds)}})
}

// InvalidateTokens makes every token issued so far invalid: the next API call with
// one gets code 99991663, as an expired tenant_access_token does.
func (s *Server) InvalidateTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.tokens {
		s.tokens[t] = false
	}
}

// Calls returns every recorded request so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the recorded requests whose path starts with prefix.
func (s *Server) CallsTo(prefix string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until at least n requests whose path starts with prefix were
// recorded and returns them.
func (s *Server) WaitCalls(ctx context.Context, prefix string, n int) ([]Call, error) {
	err := s.changes.Wait(ctx, func() bool { return len(s.CallsTo(prefix)) >= n })
	return s.CallsTo(prefix), err
}

// Messages returns the messages sent so far (create and reply), in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// WaitMessage waits until a message sent so far satisfies match and returns the
// first that does.
func (s *Server) WaitMessage(ctx context.Context, match func(Message) bool) (Message, error) {
	var found Message
	err := s.changes.Wait(ctx, func() bool {
		for _, m := range s.Messages() {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found, err
}

// WaitMessages waits until at least n messages were sent and returns them all.
func (s *Server) WaitMessages(ctx context.Context, n int) ([]Message, error) {
	err := s.wait(ctx, fmt.Sprintf("%d messages", n), func() bool { return len(s.messages) >= n })
	return s.Messages(), err
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.AppID != AppID || req.AppSecret != AppSecret {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 10014, "msg": "app secret invalid"})
		return
	}
	s.mu.Lock()
	s.tokenSeq++
	tok := fmt.Sprintf("t-g1000TESTtenantAccessToken%013d", s.tokenSeq)
	s.tokens[tok] = true
	s.mu.Unlock()
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": tok, "expire": 7200})
}

// authorized checks the bearer token and answers 99991663 when it is not valid.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	ok := s.tokens[tok]
	s.mu.Unlock()
	if !ok {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": feishu.CodeInvalidToken,
			"msg": "Invalid access token for authorization. Please make a request with token attached."})
	}
	return ok
}

type sendRequest struct {
	ReceiveID     string `json:"receive_id"`
	MsgType       string `json:"msg_type"`
	Content       string `json:"content"`
	UUID          string `json:"uuid"`
	ReplyInThread bool   `json:"reply_in_thread"`
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.uuids[m.UUID]; ok && m.UUID != "" {
		// Idempotent retry: the same message again, nothing new sent.
		s.changes.Notify()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": id, "thread_id": s.threads[id]}})
		return
	}
	s.msgSeq++
	m.ID = fmt.Sprintf("om_fake%025d", s.msgSeq)
	chat := m.ReceiveID
	if m.IDType == "open_id" {
		chat = P2PChatOf(m.ReceiveID) // Feishu answers the person's chat with the app
	}
	data := map[string]any{"message_id": m.ID, "msg_type": m.MsgType, "chat_id": chat}
	if m.Kind == "reply" {
		data["parent_id"] = m.ReplyTo
		data["root_id"] = m.ReplyTo
		if m.InThread {
			th := s.threads[m.ReplyTo]
			if th == "" {
				th = fmt.Sprintf("omt_fake%08d", s.msgSeq)
				s.threads[m.ReplyTo] = th
			}
			m.ThreadID = th
			s.threads[m.ID] = th
			data["thread_id"] = th
		}
	}
	if m.UUID != "" {
		s.uuids[m.UUID] = m.ID
	}
	s.messages = append(s.messages, m)
	s.changes.Notify()
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": data})
}

// MaxCardBody is Feishu's limit on the request body of a card or rich-text
// message (send, reply or card update): 30 KB. The fake refuses a larger one
// with 230001 (the code Feishu itself answers with is not in the fixtures).
const MaxCardBody = 30 << 10

// tooLarge answers a card or rich-text request whose body is over MaxCardBody
// and reports whether it did.
func tooLarge(w http.ResponseWriter, body []byte, msgType string) bool {
	if (msgType == "interactive" || msgType == "post") && len(body) > MaxCardBody {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": fmt.Sprintf("request body of %d bytes is over the 30 KB limit of cards", len(body))})
		return true
	}
	return false
}

func (s *Server) decodeSend(w http.ResponseWriter, r *http.Request) (sendRequest, bool) {
	var req sendRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.MsgType == "" || !json.Valid([]byte(req.Content)) {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid message content"})
		return req, false
	}
	return req, !tooLarge(w, body, req.MsgType)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	idType := r.URL.Query().Get("receive_id_type")
	switch idType {
	case "chat_id", "open_id", "user_id", "union_id", "email":
	default:
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 99992402, "msg": "field validation failed: receive_id_type"})
		return
	}
	req, ok := s.decodeSend(w, r)
	if !ok {
		return
	}
	s.send(w, r, Message{Kind: "create", ReceiveID: req.ReceiveID, IDType: idType, MsgType: req.MsgType, Content: req.Content, UUID: req.UUID})
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	req, ok := s.decodeSend(w, r)
	if !ok {
		return
	}
	s.send(w, r, Message{Kind: "reply", ReplyTo: r.PathValue("id"), InThread: req.ReplyInThread, MsgType: req.MsgType, Content: req.Content, UUID: req.UUID})
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req struct {
		Content string `json:"content"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || !json.Valid([]byte(req.Content)) {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid card content"})
		return
	}
	if tooLarge(w, body, "interactive") {
		return
	}
	s.mu.Lock()
	s.patches = append(s.patches, Patch{MessageID: r.PathValue("id"), Content: req.Content})
	s.changes.Notify()
	s.mu.Unlock()
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

// Live returns the messages sent and not recalled, in order, each with the
// content of its latest card update: what a person sees now.
func (s *Server) Live() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if s.deleted[m.ID] {
			continue
		}
		for _, p := range s.patches {
			if p.MessageID == m.ID {
				m.Content = p.Content
			}
		}
		out = append(out, m)
	}
	return out
}

// Reactions returns the reactions on message id now.
func (s *Server) Reactions(id string) []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions[id]...)
}

// ReactionCalls counts the reactions added and removed so far.
func (s *Server) ReactionCalls() (added, removed int) {
	for _, c := range s.Calls() {
		if !strings.Contains(c.Path, "/reactions") {
			continue
		}
		if c.Method == http.MethodPost {
			added++
		} else if c.Method == http.MethodDelete {
			removed++
		}
	}
	return added, removed
}

// WaitReaction waits until message id carries a reaction.
func (s *Server) WaitReaction(ctx context.Context, id string) error {
	return s.wait(ctx, "a reaction on "+id, func() bool { return len(s.reactions[id]) > 0 })
}

func (s *Server) recall(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	known := false
	for _, m := range s.messages {
		known = known || m.ID == id
	}
	gone := s.deleted[id]
	if known {
		if s.deleted == nil {
			s.deleted = map[string]bool{}
		}
		s.deleted[id] = true
	}
	s.changes.Notify()
	s.mu.Unlock()
	if !known || gone {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 230011, "msg": "The message is recalled or deleted."})
		return
	}
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
}

func (s *Server) addReaction(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req struct {
		ReactionType struct {
			EmojiType string `json:"emoji_type"`
		} `json:"reaction_type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ReactionType.EmojiType == "" {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 231001, "msg": "reaction type is invalid."})
		return
	}
	s.mu.Lock()
	s.reactionSeq++
	re := Reaction{ID: fmt.Sprintf("ZCaCIjUBVVWSrm5L-%06d", s.reactionSeq), MessageID: r.PathValue("id"), EmojiType: req.ReactionType.EmojiType}
	if s.reactions == nil {
		s.reactions = map[string][]Reaction{}
	}
	s.reactions[re.MessageID] = append(s.reactions[re.MessageID], re)
	s.changes.Notify()
	s.mu.Unlock()
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"reaction_id": re.ID, "operator": map[string]any{"operator_id": BotOpenID, "operator_type": "app"},
		"action_time": "1626086391570", "reaction_type": map[string]any{"emoji_type": re.EmojiType}}})
}

func (s *Server) removeReaction(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	id, rid := r.PathValue("id"), r.PathValue("rid")
	s.mu.Lock()
	found := false
	list := s.reactions[id]
	for i, re := range list {
		if re.ID == rid {
			s.reactions[id] = append(list[:i:i], list[i+1:]...)
			found = true
			break
		}
	}
	s.changes.Notify()
	s.mu.Unlock()
	if !found {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 231003, "msg": "The reaction is not found."})
		return
	}
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": rid}})
}

func (s *Server) botInfo(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{
		"activate_status": 2, "app_name": BotName, "avatar_url": "", "ip_white_list": []string{}, "open_id": BotOpenID}})
}

// ErrNoConnection is returned by Push when no long connection is open.
var ErrNoConnection = errors.New("feishutest: no long connection")

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	name := map[string]string{AliceOpenID: "Alice", BobOpenID: "Bob"}[r.PathValue("id")]
	if name == "" || r.URL.Query().Get("user_id_type") != "open_id" {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 41050, "msg": "no user authority error"})
		return
	}
	fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"user": map[string]any{"open_id": r.PathValue("id"), "name": name}}})
}
