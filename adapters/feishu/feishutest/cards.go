package feishutest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"openbot/adapters/feishu"
)

// Patch is one card update (PATCH /open-apis/im/v1/messages/:id) the adapter sent.
type Patch struct {
	MessageID string
	Content   string // the new card JSON
}

// Patches returns the card updates received so far, in order.
func (s *Server) Patches() []Patch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Patch(nil), s.patches...)
}

// WaitPatches waits until at least n card updates were received and returns them all.
func (s *Server) WaitPatches(ctx context.Context, n int) ([]Patch, error) {
	err := s.wait(ctx, fmt.Sprintf("%d card patches", n), func() bool { return len(s.patches) >= n })
	return s.Patches(), err
}

// Button is one button of a card JSON 2.0, as a person sees and clicks it.
type Button struct {
	Text  string
	Type  string          // "primary_filled", "danger", "default", ...
	Value json.RawMessage // the callback behaviour's value, sent back on a click
}

type cardNode struct {
	Tag     string          `json:"tag"`
	Content string          `json:"content"`
	Text    *cardNode       `json:"text"`
	Type    string          `json:"type"`
	Columns []cardNode      `json:"columns"`
	Elems   []cardNode      `json:"elements"`
	Behav   []cardBehaviour `json:"behaviors"`
	Value   json.RawMessage `json:"value"` // JSON 1.0 buttons
}

type cardBehaviour struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func cardElements(content string) []cardNode {
	var c struct {
		Body struct {
			Elements []cardNode `json:"elements"`
		} `json:"body"`
	}
	_ = json.Unmarshal([]byte(content), &c)
	return c.Body.Elements
}

func walk(ns []cardNode, f func(cardNode)) {
	for _, n := range ns {
		f(n)
		walk(n.Columns, f)
		walk(n.Elems, f)
	}
}

// CardButtons returns the buttons of a card JSON in order, nested in column sets or
// not.
func CardButtons(content string) []Button {
	var out []Button
	walk(cardElements(content), func(n cardNode) {
		if n.Tag != "button" {
			return
		}
		b := Button{Type: n.Type, Value: n.Value}
		if n.Text != nil {
			b.Text = n.Text.Content
		}
		for _, bh := range n.Behav {
			if bh.Type == "callback" {
				b.Value = bh.Value
			}
		}
		out = append(out, b)
	})
	return out
}

// CardText returns every markdown element of a card JSON, joined by newlines.
func CardText(content string) string {
	var parts []string
	walk(cardElements(content), func(n cardNode) {
		if n.Tag == "markdown" {
			parts = append(parts, n.Content)
		}
	})
	return strings.Join(parts, "\n")
}

// Buttons returns the buttons of an interactive message.
func (m Message) Buttons() []Button { return CardButtons(m.Content) }

// Button returns the button labelled text; ok is false when there is none.
func (m Message) Button(text string) (Button, bool) {
	for _, b := range m.Buttons() {
		if b.Text == text {
			return b, true
		}
	}
	return Button{}, false
}

// CardAction describes a click on a card button.
type CardAction struct {
	EventID   string          // default: random
	OpenID    string          // the clicker; default AliceOpenID
	MessageID string          // the card's message id
	ChatID    string          // default GroupChat
	Value     json.RawMessage // the button's value (Button.Value)
	Token     string          // v2 header token; default VerificationToken
}

func (c CardAction) defaults() CardAction {
	if c.EventID == "" {
		c.EventID = "ev-card-" + strings.ToLower(rand.Text())
	}
	c.OpenID = cmp.Or(c.OpenID, AliceOpenID)
	c.ChatID = cmp.Or(c.ChatID, GroupChat)
	c.Token = cmp.Or(c.Token, VerificationToken)
	if c.Value == nil {
		c.Value = json.RawMessage(`{}`)
	}
	return c
}

// JSON returns the card.action.trigger (callback v2) envelope the platform POSTs
// to the card request URL (before encryption) or sends over the long connection
// (fixtures feishu/card_action_trigger_v2.json).
func (c CardAction) JSON() []byte {
	c = c.defaults()
	ms := strconv.FormatInt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 10)
	b, _ := json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": c.EventID, "token": c.Token, "create_time": ms,
			"event_type": "card.action.trigger", "tenant_key": "1a2b3c4d5e6f7a8b", "app_id": AppID},
		"event": map[string]any{
			"operator": map[string]any{"tenant_key": "1a2b3c4d5e6f7a8b", "open_id": c.OpenID, "union_id": "on_" + c.OpenID[3:]},
			"token":    "c-" + c.EventID,
			"action":   map[string]any{"value": c.Value, "tag": "button"},
			"host":     "im_message",
			"context":  map[string]any{"open_message_id": c.MessageID, "open_chat_id": c.ChatID},
		},
	})
	return b
}

// LegacyJSON returns the flat legacy card callback body
// (fixtures feishu/card_action_legacy.json).
func (c CardAction) LegacyJSON() []byte {
	c = c.defaults()
	b, _ := json.Marshal(map[string]any{
		"open_id": c.OpenID, "open_message_id": c.MessageID, "open_chat_id": c.ChatID,
		"tenant_key": "1a2b3c4d5e6f7a8b", "token": "c-" + c.EventID,
		"action": map[string]any{"value": c.Value, "tag": "button"},
	})
	return b
}

// LegacyCardRequest builds a legacy card callback POST to target, signed as the
// platform signs them: X-Lark-Signature = hex SHA-1(timestamp + nonce +
// verification token + body) (fixtures feishu/card_action_legacy_signature_vector.json).
func LegacyCardRequest(target string, body []byte, verificationToken string) (*http.Request, error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	nonce := rand.Text()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("feishutest: %w", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Lark-Request-Timestamp", ts)
	req.Header.Set("X-Lark-Request-Nonce", nonce)
	req.Header.Set("X-Lark-Signature", feishu.LegacyCardSignature(ts, nonce, verificationToken, body))
	return req, nil
}
