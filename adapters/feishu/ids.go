package feishu

import (
	"cmp"
	"errors"
	"strings"

	"openbot/core"
)

// ErrBadConversation is returned by ParseConversation (and so by Adapter.Deliver) for
// a ConversationRef that this adapter did not build.
var ErrBadConversation = errors.New("feishu: malformed conversation ref")

// Platform is the binding platform name of Feishu threads (core.Binding.Platform).
const Platform = "feishu"

// Conversation is a parsed Feishu conversation reference: where the replies of one
// openbot thread go (DESIGN.md §3 "Where replies go"). Chat is the chat_id ("oc_…");
// Root is the message id ("om_…") that roots the group topic thread, empty for a p2p
// chat, whose replies go to the chat itself.
type Conversation struct {
	Chat string
	Root string
}

// Ref encodes c as an opaque core.ConversationRef: "<chat_id>" or "<chat_id>:<root id>".
func (c Conversation) Ref() core.ConversationRef {
	if c.Root == "" {
		return core.ConversationRef(c.Chat)
	}
	return core.ConversationRef(c.Chat + ":" + c.Root)
}

// ParseConversation decodes a ref built by Conversation.Ref. It returns
// ErrBadConversation when the ref has the wrong shape or empty parts.
func ParseConversation(ref core.ConversationRef) (Conversation, error) {
	parts := strings.Split(string(ref), ":")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return Conversation{Chat: parts[0]}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return Conversation{Chat: parts[0], Root: parts[1]}, nil
	}
	return Conversation{}, ErrBadConversation
}

// DedupKey is the platform identity of one Feishu message (DESIGN.md §3):
// "feishu:<message_id>". A redelivery with a new event_id, and the copies that
// several apps in one chat receive, share it.
func DedupKey(messageID string) string { return "feishu:" + messageID }

// ThreadKey returns the openbot thread key of a group message (DESIGN.md §3 table):
// "feishu:<chat>:<root message id>", where the root is the message's root_id when it
// is inside a topic thread or reply chain, else its own message_id.
func ThreadKey(chat, messageID, rootID string) string {
	rootID = cmp.Or(rootID, messageID)
	return "feishu:" + chat + ":" + rootID
}

// DialogKey returns the thread key of a p2p chat, "feishu:<chat>": the chat's current
// dialog, which "/new" replaces (DESIGN.md §3 table).
func DialogKey(chat string) string { return "feishu:" + chat }

// ActorID returns the human actor of a Feishu user: "feishu:<open_id>" (DESIGN.md §1).
func ActorID(openID string) core.ActorID { return core.ActorID("feishu:" + openID) }

var _ core.Channeler = (*Adapter)(nil)

// ChannelOf implements core.Channeler: a conversation's channel is its chat,
// whatever topic it is; a ref it cannot parse is its own.
func (a *Adapter) ChannelOf(ref core.ConversationRef) string {
	c, err := ParseConversation(ref)
	if err != nil {
		return string(ref)
	}
	return c.Chat
}
