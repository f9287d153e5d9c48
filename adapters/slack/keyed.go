package slack

import (
	"encoding/json"

	"github.com/slack-go/slack/socketmode"
)

// socketParallel bounds the Socket Mode envelopes being handled at once.
const socketParallel = 64

// envelopeKey is the conversation an envelope belongs to, the channel of its
// event, click or command; "" (one shared key) when the payload names none.
func envelopeKey(evt socketmode.Event) string {
	if evt.Request == nil || len(evt.Request.Payload) == 0 {
		return ""
	}
	var p struct {
		Event struct {
			Channel string `json:"channel"`
		} `json:"event"`
		Channel struct {
			ID string `json:"id"`
		} `json:"channel"`
		ChannelID string `json:"channel_id"`
	}
	if json.Unmarshal(evt.Request.Payload, &p) != nil {
		return ""
	}
	switch {
	case p.Event.Channel != "":
		return p.Event.Channel
	case p.Channel.ID != "":
		return p.Channel.ID
	}
	return p.ChannelID
}
