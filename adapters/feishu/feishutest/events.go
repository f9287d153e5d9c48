package feishutest

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"openbot/adapters/feishu"
)

// Mention is one entry of an event's mentions[]. A bot mention has no UserID.
type Mention struct {
	Key    string // "@_user_1"
	OpenID string
	UserID string
	Name   string
}

// BotMention is the mention of the fake's bot under key (e.g. "@_user_1").
func BotMention(key string) Mention { return Mention{Key: key, OpenID: BotOpenID, Name: BotName} }

// MessageEvent describes an im.message.receive_v1 event.
type MessageEvent struct {
	EventID   string // default: derived from MessageID
	MessageID string // required
	ChatID    string // default GroupChat
	ChatType  string // "group" (default) or "p2p"
	RootID    string
	ParentID  string
	ThreadID  string
	Sender    string // open_id, default AliceOpenID
	// SenderType is "user" (default) or "app", for a message a bot sent.
	SenderType string
	MsgType    string // default "text"
	Text       string // for text messages, with @_user_N placeholders
	Content    string // overrides the content JSON string (post, image, ...)
	Mentions   []Mention
	Token      string // default VerificationToken
}

// JSON returns the v2 event envelope, as webhook mode POSTs it (before encryption)
// and the long connection carries it.
func (e MessageEvent) JSON() []byte {
	e.ChatID = cmp.Or(e.ChatID, GroupChat)
	e.ChatType = cmp.Or(e.ChatType, "group")
	e.Sender = cmp.Or(e.Sender, AliceOpenID)
	e.MsgType = cmp.Or(e.MsgType, "text")
	e.EventID = cmp.Or(e.EventID, "ev-"+e.MessageID)
	e.Token = cmp.Or(e.Token, VerificationToken)
	content := e.Content
	if content == "" {
		b, _ := json.Marshal(map[string]string{"text": e.Text})
		content = string(b)
	}
	var mentions []map[string]any
	for _, m := range e.Mentions {
		id := map[string]string{"open_id": m.OpenID, "union_id": "on_" + m.OpenID[3:]}
		if m.UserID != "" {
			id["user_id"] = m.UserID
		}
		mentions = append(mentions, map[string]any{"key": m.Key, "id": id, "name": m.Name, "tenant_key": "1a2b3c4d5e6f7a8b"})
	}
	ms := strconv.FormatInt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 10)
	msg := map[string]any{
		"message_id": e.MessageID, "create_time": ms, "update_time": ms, "chat_id": e.ChatID,
		"chat_type": e.ChatType, "message_type": e.MsgType, "content": content,
	}
	for k, v := range map[string]string{"root_id": e.RootID, "parent_id": e.ParentID, "thread_id": e.ThreadID} {
		if v != "" {
			msg[k] = v
		}
	}
	if mentions != nil {
		msg["mentions"] = mentions
	}
	b, _ := json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": e.EventID, "token": e.Token, "create_time": ms,
			"event_type": "im.message.receive_v1", "tenant_key": "1a2b3c4d5e6f7a8b", "app_id": AppID},
		"event": map[string]any{
			"sender":  map[string]any{"sender_id": map[string]string{"open_id": e.Sender}, "sender_type": cmp.Or(e.SenderType, "user"), "tenant_key": "1a2b3c4d5e6f7a8b"},
			"message": msg,
		},
	})
	return b
}

// WebhookRequest builds the POST the platform sends to target (e.g.
// "http://127.0.0.1:1234/feishu/acme/events") carrying payload. With an encryptKey
// the body is {"encrypt": ...} under a random IV and signed with the
// X-Lark-Request-Timestamp/Nonce/Signature headers; without one it is payload as is.
func WebhookRequest(target string, payload []byte, encryptKey string) (*http.Request, error) {
	return WebhookRequestAt(target, payload, encryptKey, time.Now())
}

// WebhookRequestAt is WebhookRequest with the X-Lark-Request-Timestamp of at, for
// tests of the freshness window and adapters on a test clock.
func WebhookRequestAt(target string, payload []byte, encryptKey string, at time.Time) (*http.Request, error) {
	body := payload
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := rand.Text()
	if encryptKey != "" {
		iv := make([]byte, 16)
		_, _ = rand.Read(iv)
		enc, err := feishu.Encrypt(encryptKey, payload, iv)
		if err != nil {
			return nil, err
		}
		body, _ = json.Marshal(map[string]string{"encrypt": enc})
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("feishutest: %w", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if encryptKey != "" {
		req.Header.Set("X-Lark-Request-Timestamp", ts)
		req.Header.Set("X-Lark-Request-Nonce", nonce)
		req.Header.Set("X-Lark-Signature", feishu.Signature(ts, nonce, encryptKey, body))
	}
	return req, nil
}
