package slacktest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Click is one press of a Block Kit button, as Slack reports it in a block_actions
// interaction payload (fixtures interactive_block_actions.http_body.txt and
// socket_mode_interactive_block_actions.json). Zero Team takes DefaultTeam.
type Click struct {
	Team      string
	User      string // the clicker's user id, "U…"; empty for an unidentifiable click
	UserName  string // the clicker's username
	Channel   string
	MessageTS string // ts of the message with the button
	ThreadTS  string // root ts of its thread, if any
	ActionID  string
	Value     string
	Label     string // the button's text; default "Button"
}

// Payload is the block_actions JSON Slack sends for c.
func (c Click) Payload() json.RawMessage {
	c.Team = cmp.Or(c.Team, DefaultTeam)
	c.Label = cmp.Or(c.Label, "Button")
	container := map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.Channel, "is_ephemeral": false}
	if c.ThreadTS != "" {
		container["thread_ts"] = c.ThreadTS
	}
	user := map[string]any{"id": c.User, "username": c.UserName, "name": c.UserName, "team_id": c.Team}
	p := map[string]any{
		"type":                  "block_actions",
		"user":                  user,
		"api_app_id":            DefaultAppID,
		"token":                 "TESTverificationTOKEN000",
		"container":             container,
		"trigger_id":            "1767225700123.1000000000001.0a1b2c3d4e5f60718293a4b5c6d7e8f9",
		"team":                  map[string]any{"id": c.Team, "domain": "test-workspace"},
		"enterprise":            nil,
		"is_enterprise_install": false,
		"channel":               map[string]any{"id": c.Channel, "name": "eng-builds"},
		"message":               map[string]any{"type": "message", "ts": c.MessageTS, "user": DefaultBotUser, "bot_id": DefaultBotID, "thread_ts": c.ThreadTS},
		"state":                 map[string]any{"values": map[string]any{}},
		"response_url":          "https://hooks.slack.com/actions/" + c.Team + "/1000000000001/TESTresponseURLtoken000000",
		"actions": []any{map[string]any{
			"action_id": c.ActionID, "block_id": "openbot_question_actions", "value": c.Value, "type": "button",
			"text":      map[string]any{"type": "plain_text", "text": c.Label, "emoji": true},
			"action_ts": "1767225700.123456",
		}},
	}
	b, _ := json.Marshal(p) // only plain values: cannot fail
	return b
}

// PushClick sends c to the connected Socket Mode client as an "interactive"
// envelope with the given envelope id (see WaitAck).
func (s *Server) PushClick(ctx context.Context, envelopeID string, c Click) error {
	return s.PushEnvelope(ctx, "interactive", envelopeID, c.Payload(), 0)
}

// InteractiveRequest builds the POST Slack sends to an app's interactivity request
// URL for payload: a form body "payload=<json>", signed with secret (v0 signature)
// at time now. Pass a wrong secret to test refusal.
func InteractiveRequest(ctx context.Context, target, secret string, payload json.RawMessage, now time.Time) (*http.Request, error) {
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	Sign(req.Header, body, secret, now)
	return req, nil
}

// Sign sets the X-Slack-Request-Timestamp and X-Slack-Signature headers Slack puts
// on a request with body, signed with secret at time now.
func Sign(h http.Header, body []byte, secret string, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
}
