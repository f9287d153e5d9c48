// Package telegramtest is a fake Telegram Bot API server for tests: an httptest
// server on 127.0.0.1 that speaks the real wire protocol (POST /bot<token>/<method>,
// form-encoded or JSON parameters, {"ok":…,"result":…} answers), so the real
// telegram-bot-api code paths run. It serves getMe, getUpdates (a scripted queue per
// bot that honours offset as confirmation and a short long-poll wait), sendMessage,
// editMessageText, editMessageReplyMarkup, deleteMessage, answerCallbackQuery, sendChatAction,
// setWebhook, getWebhookInfo and deleteWebhook for any number of bots, records every call with its
// parameters, refuses a text longer than Telegram's limit as Telegram does
// (MaxMessageLen), and can be scripted to fail calls (429 with retry_after,
// "can't parse entities", 403 blocked, …). It also serves files: getFile, the file URL, and
// sendDocument and sendPhoto uploads (files.go). CallbackUpdate builds inline-button clicks and
// Buttons reads the inline keyboard a client sent.
package telegramtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"openbot/adapters/internal/fakeserver"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
)

// Bot is a bot user served by getMe.
type Bot struct {
	Token    string
	ID       int64
	Username string
	Name     string // first_name; defaults to Username
	// ReadsGroups is getMe's can_read_all_group_messages: privacy mode off
	// (@BotFather /setprivacy), so the bot sees every group message.
	ReadsGroups bool
}

// Call is one recorded request.
type Call struct {
	Token  string
	Method string
	// Params are the request parameters as strings; nested objects
	// (reply_parameters, reply_markup) are JSON text as the client sent them.
	Params map[string]string
	At     time.Time
}

// Error is a scripted Bot API error answer.
type Error struct {
	Code        int    // error_code and HTTP status
	Description string // for example "Bad Request: can't parse entities: …"
	RetryAfter  int    // parameters.retry_after, seconds
}

// Common scripted errors, with the descriptions Telegram sends.
var (
	ErrCantParse   = Error{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
	ErrChatMissing = Error{Code: 400, Description: "Bad Request: chat not found"}
	ErrBlocked     = Error{Code: 403, Description: "Forbidden: bot was blocked by the user"}
)

// RateLimited returns a 429 answer asking to wait seconds.
func RateLimited(seconds int) Error {
	return Error{Code: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", seconds), RetryAfter: seconds}
}

type botState struct {
	Bot
	updates   []json.RawMessage // queued, ascending update_id
	nextID    int64
	confirmed int64 // highest offset seen in getUpdates
	webhook   string
	secret    string
}

// Server is the fake Bot API. Create it with NewServer and Close it when done.
type Server struct {
	srv *httptest.Server
	// LongPollCap bounds how long getUpdates waits for updates, whatever timeout the
	// client asks for; default 200ms, so tests stay fast.
	LongPollCap time.Duration

	mu      sync.Mutex
	bots    map[string]*botState // by token
	calls   []Call
	fail    map[string][]Error // by method, consumed in order
	holds   fakeserver.Holds
	nextMsg int64
	msgs    []*Message         // sent and not deleted, in send order
	changes fakeserver.Changes // notified on every change
	files   map[string]string  // file_id -> content (files.go)
}

// Message is a message as the fake holds it now: sent with sendMessage, changed
// by editMessageText, gone after deleteMessage.
type Message struct {
	Token     string
	Chat, ID  int64
	Text      string
	ParseMode string
	Edits     int // editMessageText calls that reached it
	// File, FileName, Caption and Method are set for sendDocument and sendPhoto.
	File, FileName, Caption, Method string
}

// Messages returns the messages the bot with token has in the chats now, in send
// order.
func (s *Server) Messages(token string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs {
		if m.Token == token {
			out = append(out, *m)
		}
	}
	return out
}

// NewServer starts a fake Bot API serving bots.
func NewServer(bots ...Bot) *Server {
	s := &Server{
		LongPollCap: 200 * time.Millisecond,
		bots:        map[string]*botState{},
		fail:        map[string][]Error{},
		nextMsg:     1000,
	}
	for _, b := range bots {
		s.AddBot(b)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddBot serves one more bot.
func (s *Server) AddBot(b Bot) {
	b.Name = cmp.Or(b.Name, b.Username)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bots[b.Token] = &botState{Bot: b, nextID: 1}
}

// URL is the server's base URL ("http://127.0.0.1:port"), usable as
// telegram.Options.APIEndpoint.
func (s *Server) URL() string { return s.srv.URL }

// Endpoint is the telegram-bot-api endpoint format string for
// tgbotapi.NewBotAPIWithAPIEndpoint: URL()+"/bot%s/%s".
func (s *Server) Endpoint() string { return s.srv.URL + "/bot%s/%s" }

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// PushUpdate queues an update for the bot with token. An update_id of 0 (or
// missing) is replaced by the next id after the last queued one. It returns the
// update_id used.
func (s *Server) PushUpdate(token string, update []byte) (int64, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(update, &m); err != nil {
		return 0, fmt.Errorf("telegramtest: update is not a JSON object: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bots[token]
	if !ok {
		return 0, fmt.Errorf("telegramtest: no bot with that token")
	}
	var id int64
	if raw, ok := m["update_id"]; ok {
		_ = json.Unmarshal(raw, &id)
	}
	if id == 0 {
		id = b.nextID
		m["update_id"] = json.RawMessage(strconv.FormatInt(id, 10))
		update, _ = json.Marshal(m)
	}
	if id >= b.nextID {
		b.nextID = id + 1
	}
	b.updates = append(b.updates, json.RawMessage(update))
	s.changes.Notify()
	return id, nil
}

// Confirmed returns the highest offset the bot's client sent to getUpdates: every
// update below it has been confirmed and dropped.
func (s *Server) Confirmed(token string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bots[token]; ok {
		return b.confirmed
	}
	return 0
}

// Pending returns how many queued updates the bot has not confirmed.
func (s *Server) Pending(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bots[token]; ok {
		return len(b.updates)
	}
	return 0
}

// Webhook returns the URL and secret_token of the bot's last setWebhook.
func (s *Server) Webhook(token string) (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bots[token]; ok {
		return b.webhook, b.secret
	}
	return "", ""
}

// Fail makes the next calls of method (by any bot) answer with errs, one per call,
// in order; later calls succeed again.
func (s *Server) Fail(method string, errs ...Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], errs...)
}

// FailAfter lets the next ok calls of method succeed and then answers errs, one per
// call, in order (after anything queued before).
func (s *Server) FailAfter(method string, ok int, errs ...Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range ok {
		s.fail[method] = append(s.fail[method], Error{}) // Code 0: answer normally
	}
	s.fail[method] = append(s.fail[method], errs...)
}

// Hold makes calls of method (by any bot) wait, after they are recorded, until
// release is called (or the client gives up), so a test can see what happens while
// a call is in flight. release is idempotent.
func (s *Server) Hold(method string) (release func()) { return s.holds.Hold(method) }

// Forget drops the calls and sent messages recorded so far (updates still queued
// stay), so a long load run (openbot bench) does not count the fake's record as
// the process's memory; later edits or deletes of forgotten messages fail as for
// unknown ones.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.msgs = nil, nil
}

// Calls returns every recorded call of the given methods (all calls when none are
// given), oldest first.
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Wait blocks until cond returns true (checked now and after every recorded
// call or change) or ctx is done, and returns ctx's error in that case.
func (s *Server) Wait(ctx context.Context, cond func(s *Server) bool) error {
	return s.changes.Wait(ctx, func() bool { return cond(s) })
}

// WaitCalls blocks until at least n calls of method were recorded and returns all of
// them, or returns ctx's error with those seen so far.
func (s *Server) WaitCalls(ctx context.Context, method string, n int) ([]Call, error) {
	var calls []Call
	err := s.changes.Wait(ctx, func() bool { calls = s.Calls(method); return len(calls) >= n })
	return calls, err
}

// WaitConfirmed blocks until the bot's client confirmed every update below offset.
func (s *Server) WaitConfirmed(ctx context.Context, token string, offset int64) error {
	return s.changes.Wait(ctx, func() bool { return s.Confirmed(token) >= offset })
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type answer struct {
	OK          bool          `json:"ok"`
	Result      any           `json:"result,omitempty"`
	ErrorCode   int           `json:"error_code,omitempty"`
	Description string        `json:"description,omitempty"`
	Parameters  *answerParams `json:"parameters,omitempty"`
}

type answerParams struct {
	RetryAfter int `json:"retry_after,omitempty"`
}

func writeError(w http.ResponseWriter, e Error) {
	a := answer{ErrorCode: e.Code, Description: e.Description}
	if e.RetryAfter > 0 {
		a.Parameters = &answerParams{RetryAfter: e.RetryAfter}
	}
	fakeserver.WriteJSON(w, e.Code, a)
}

// parseParams reads form-encoded (what telegram-bot-api sends), multipart, query or
// JSON parameters into strings; JSON objects and arrays stay JSON text.
func parseParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				return nil, err
			}
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				out[k] = str
			} else {
				out[k] = string(v)
			}
		}
		return out, nil
	}
	if ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, err
		}
	} else if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k, v := range r.Form {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		s.serveFile(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeError(w, Error{Code: 404, Description: "Not Found"})
		return
	}
	params, err := parseParams(r)
	if err != nil {
		writeError(w, Error{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	s.mu.Lock()
	b, known := s.bots[token]
	s.calls = append(s.calls, Call{Token: token, Method: method, Params: params, At: time.Now()})
	var scripted *Error
	if known {
		if q := s.fail[method]; len(q) > 0 {
			scripted, s.fail[method] = &q[0], q[1:]
		}
	}
	s.changes.Notify()
	s.mu.Unlock()
	if !s.holds.Wait(r.Context(), method) {
		return
	}

	switch {
	case !known:
		writeError(w, Error{Code: 401, Description: "Unauthorized"})
		return
	case scripted != nil && scripted.Code != 0:
		writeError(w, *scripted)
		return
	}

	switch method {
	case "getMe":
		s.ok(w, map[string]any{"id": b.ID, "is_bot": true, "first_name": b.Name, "username": b.Username,
			"can_join_groups": true, "can_read_all_group_messages": b.ReadsGroups, "supports_inline_queries": false})
	case "getUpdates":
		s.getUpdates(w, r, b, params)
	case "sendMessage", "editMessageText", "editMessageReplyMarkup":
		s.message(w, b, method, params)
	case "deleteMessage":
		s.delete(w, b, params)
	case "getFile":
		s.getFile(w, params)
	case "sendDocument", "sendPhoto":
		s.upload(w, r, b, method, params)
	case "answerCallbackQuery", "sendChatAction":
		s.ok(w, true)
	case "setWebhook":
		s.mu.Lock()
		b.webhook, b.secret = params["url"], params["secret_token"]
		s.changes.Notify()
		s.mu.Unlock()
		fakeserver.WriteJSON(w, 200, answer{OK: true, Result: true, Description: "Webhook was set"})
	case "getWebhookInfo":
		s.mu.Lock()
		info := map[string]any{"url": b.webhook, "has_custom_certificate": false, "pending_update_count": len(b.updates)}
		s.mu.Unlock()
		s.ok(w, info)
	case "deleteWebhook":
		s.mu.Lock()
		b.webhook, b.secret = "", ""
		if params["drop_pending_updates"] == "true" {
			b.updates = nil
		}
		s.changes.Notify()
		s.mu.Unlock()
		fakeserver.WriteJSON(w, 200, answer{OK: true, Result: true, Description: "Webhook was deleted"})
	default:
		writeError(w, Error{Code: 404, Description: "Not Found: method not found"})
	}
}

func (s *Server) ok(w http.ResponseWriter, result any) {
	fakeserver.WriteJSON(w, 200, answer{OK: true, Result: result})
}

// getUpdates confirms every update below offset, then answers the queued ones (at
// most limit) or waits up to min(timeout, LongPollCap) for one to arrive.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, b *botState, params map[string]string) {
	offset, _ := strconv.ParseInt(params["offset"], 10, 64)
	limit, _ := strconv.Atoi(params["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(params["timeout"])
	wait := time.Duration(timeout) * time.Second
	if wait > s.LongPollCap {
		wait = s.LongPollCap
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	out, conflict := []json.RawMessage{}, false
	_ = s.changes.Wait(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if conflict = b.webhook != ""; conflict {
			return true
		}
		if offset > b.confirmed {
			b.confirmed = offset
		}
		kept := b.updates[:0]
		for _, u := range b.updates {
			var id struct {
				UpdateID int64 `json:"update_id"`
			}
			_ = json.Unmarshal(u, &id)
			if id.UpdateID >= offset {
				kept = append(kept, u)
			}
		}
		b.updates = kept
		out = append(out[:0], b.updates[:min(limit, len(b.updates))]...)
		return len(out) > 0
	})
	switch {
	case conflict:
		writeError(w, Error{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
	case len(out) > 0 || r.Context().Err() == nil: // updates, or the long poll's wait is over
		s.ok(w, out)
	}
}

// message answers sendMessage and the edit methods with a Message built from the
// parameters: a new message_id for sendMessage, the given one for edits.
func (s *Server) message(w http.ResponseWriter, b *botState, method string, params map[string]string) {
	chatID, err := strconv.ParseInt(params["chat_id"], 10, 64)
	if err != nil || chatID == 0 {
		writeError(w, Error{Code: 400, Description: "Bad Request: chat_id is empty"})
		return
	}
	if method == "sendMessage" && strings.TrimSpace(params["text"]) == "" {
		writeError(w, Error{Code: 400, Description: "Bad Request: message text is empty"})
		return
	}
	if method != "editMessageReplyMarkup" && VisibleLen(params["text"], params["parse_mode"]) > MaxMessageLen {
		writeError(w, Error{Code: 400, Description: "Bad Request: message is too long"})
		return
	}
	s.mu.Lock()
	id := s.nextMsg
	if method == "sendMessage" {
		s.nextMsg++
		s.msgs = append(s.msgs, &Message{Token: b.Token, Chat: chatID, ID: id, Text: params["text"], ParseMode: params["parse_mode"]})
	} else {
		id, _ = strconv.ParseInt(params["message_id"], 10, 64)
		if m := s.findLocked(b.Token, chatID, id); m != nil && method == "editMessageText" {
			m.Text, m.ParseMode = params["text"], params["parse_mode"]
			m.Edits++
		}
	}
	s.changes.Notify()
	s.mu.Unlock()
	chatType := "private"
	if chatID < 0 {
		chatType = "supergroup"
	}
	msg := map[string]any{
		"message_id": id,
		"from":       map[string]any{"id": b.ID, "is_bot": true, "first_name": b.Name, "username": b.Username},
		"chat":       map[string]any{"id": chatID, "type": chatType},
		"date":       time.Now().Unix(),
		"text":       params["text"],
	}
	if t, err := strconv.ParseInt(params["message_thread_id"], 10, 64); err == nil && t != 0 {
		msg["message_thread_id"] = t
		msg["is_topic_message"] = true
	}
	if rm := params["reply_markup"]; rm != "" && json.Valid([]byte(rm)) {
		msg["reply_markup"] = json.RawMessage(rm)
	}
	s.ok(w, msg)
}

// MaxMessageLen is Telegram's limit on a message's text, in UTF-16 code units of
// the text as shown (HTML tags and entities parsed); a longer one is refused with
// "message is too long".
const MaxMessageLen = 4096

// VisibleLen is the length Telegram checks against MaxMessageLen: UTF-16 code
// units of the text, with HTML tags left out and entities counted as the
// character they stand for when parseMode is HTML.
func VisibleLen(text, parseMode string) int {
	if strings.EqualFold(parseMode, "HTML") {
		var b strings.Builder
		in := false
		for _, r := range text {
			switch {
			case r == '<':
				in = true
			case r == '>' && in:
				in = false
			case !in:
				b.WriteRune(r)
			}
		}
		text = html.UnescapeString(b.String())
	}
	return len(utf16.Encode([]rune(text)))
}

func (s *Server) findLocked(token string, chat, id int64) *Message {
	for _, m := range s.msgs {
		if m.Token == token && m.Chat == chat && m.ID == id {
			return m
		}
	}
	return nil
}

// delete answers deleteMessage: the message goes, or "message to delete not found".
func (s *Server) delete(w http.ResponseWriter, b *botState, params map[string]string) {
	chat, _ := strconv.ParseInt(params["chat_id"], 10, 64)
	id, _ := strconv.ParseInt(params["message_id"], 10, 64)
	s.mu.Lock()
	found := false
	for i, m := range s.msgs {
		if m.Token == b.Token && m.Chat == chat && m.ID == id {
			s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
			found = true
			break
		}
	}
	s.changes.Notify()
	s.mu.Unlock()
	if !found {
		writeError(w, Error{Code: 400, Description: "Bad Request: message to delete not found"})
		return
	}
	s.ok(w, true)
}

// ParseReplyTo returns reply_parameters.message_id of a sendMessage call (or the
// legacy reply_to_message_id), 0 when it has none.
func ParseReplyTo(c Call) int64 {
	if rp := c.Params["reply_parameters"]; rp != "" {
		var v struct {
			MessageID int64 `json:"message_id"`
		}
		if json.Unmarshal([]byte(rp), &v) == nil {
			return v.MessageID
		}
	}
	id, _ := strconv.ParseInt(c.Params["reply_to_message_id"], 10, 64)
	return id
}

// WebhookRequest builds a webhook POST of update for url with the secret header set
// (omitted when secret is "").
func WebhookRequest(ctx context.Context, target string, secret string, update []byte) (*http.Request, error) {
	if _, err := url.Parse(target); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(string(update)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	return req, nil
}
