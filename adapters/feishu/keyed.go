package feishu

import "encoding/json"

// wsParallel bounds the long-connection events being handled at once.
const wsParallel = 64

// payloadKey is the chat an event payload belongs to (a message's chat_id, a card
// click's open_chat_id); "" (one shared key) when it names none.
func payloadKey(payload []byte) string {
	var p struct {
		Event struct {
			Message struct {
				ChatID string `json:"chat_id"`
			} `json:"message"`
			Context struct {
				OpenChatID string `json:"open_chat_id"`
			} `json:"context"`
		} `json:"event"`
		OpenChatID string `json:"open_chat_id"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	switch {
	case p.Event.Message.ChatID != "":
		return p.Event.Message.ChatID
	case p.Event.Context.OpenChatID != "":
		return p.Event.Context.OpenChatID
	}
	return p.OpenChatID
}
