package slacktest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Command is one use of a slash command, as Slack reports it: a form POST to the
// command's request URL in http mode, a "slash_commands" envelope in Socket Mode
// (the same fields as JSON). Zero Team takes DefaultTeam; zero TriggerID a fixed one.
type Command struct {
	Team      string
	Channel   string // "D…" for a DM
	User      string
	UserName  string
	Command   string // "/new"
	Text      string
	TriggerID string
}

func (c Command) fields() map[string]string {
	c.Team = cmp.Or(c.Team, DefaultTeam)
	c.TriggerID = cmp.Or(c.TriggerID, "1767225800123.1000000000001.0a1b2c3d4e5f60718293a4b5c6d7e8f9")
	channelName := "eng-builds"
	if len(c.Channel) > 0 && c.Channel[0] == 'D' {
		channelName = "directmessage"
	}
	return map[string]string{
		"token": "TESTverificationTOKEN000", "team_id": c.Team, "team_domain": "test-workspace",
		"channel_id": c.Channel, "channel_name": channelName, "user_id": c.User, "user_name": c.UserName,
		"command": c.Command, "text": c.Text, "api_app_id": DefaultAppID, "is_enterprise_install": "false",
		"response_url": "https://hooks.slack.com/commands/" + c.Team + "/1000000000001/TESTresponseURLtoken000000",
		"trigger_id":   c.TriggerID,
	}
}

// Form is the form body Slack POSTs for c in http mode.
func (c Command) Form() url.Values {
	v := url.Values{}
	for k, x := range c.fields() {
		v.Set(k, x)
	}
	return v
}

// Payload is the payload of the slash_commands envelope Slack sends for c.
func (c Command) Payload() json.RawMessage {
	b, _ := json.Marshal(c.fields()) // only strings: cannot fail
	return b
}

// PushCommand sends c to the connected Socket Mode client as a "slash_commands"
// envelope with the given envelope id (see WaitAck; the ack's payload is the reply).
func (s *Server) PushCommand(ctx context.Context, envelopeID string, c Command) error {
	env := map[string]any{"envelope_id": envelopeID, "payload": c.Payload(), "type": "slash_commands", "accepts_response_payload": true}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return s.Push(ctx, b)
}

// CommandRequest builds the POST Slack sends to a slash command's request URL for
// c, signed with secret (v0 signature) at time now.
func CommandRequest(ctx context.Context, target, secret string, c Command, now time.Time) (*http.Request, error) {
	body := []byte(c.Form().Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	Sign(req.Header, body, secret, now)
	return req, nil
}
