package slack

import (
	"cmp"
	"errors"
	"strings"

	"openbot/core"
)

// ErrBadConversation is returned by ParseConversation (and so by Adapter.Deliver) for
// a ConversationRef that this adapter did not build.
var ErrBadConversation = errors.New("slack: malformed conversation ref")

// Conversation is a parsed Slack conversation reference: where replies of one openbot
// thread go (DESIGN.md §3 "Where replies go"). ThreadTS is empty for a top-level DM.
type Conversation struct {
	Team     string // workspace id, "T…"
	Channel  string // channel, group or DM id, "C…", "G…", "D…"
	ThreadTS string // root ts of the Slack thread replies go to; "" for the DM itself
}

// Ref encodes c as an opaque core.ConversationRef: "<team>:<channel>" or
// "<team>:<channel>:<thread_ts>".
func (c Conversation) Ref() core.ConversationRef {
	if c.ThreadTS == "" {
		return core.ConversationRef(c.Team + ":" + c.Channel)
	}
	return core.ConversationRef(c.Team + ":" + c.Channel + ":" + c.ThreadTS)
}

// ParseConversation decodes a ref built by Conversation.Ref. It returns
// ErrBadConversation when the ref has the wrong shape or empty parts.
func ParseConversation(ref core.ConversationRef) (Conversation, error) {
	parts := strings.Split(string(ref), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Conversation{}, ErrBadConversation
	}
	c := Conversation{Team: parts[0], Channel: parts[1]}
	if len(parts) == 3 {
		c.ThreadTS = parts[2]
		if c.ThreadTS == "" {
			return Conversation{}, ErrBadConversation
		}
	}
	if c.Team == "" || c.Channel == "" {
		return Conversation{}, ErrBadConversation
	}
	return c, nil
}

// DedupKey is the platform identity of one Slack message (DESIGN.md §3):
// "slack:<team>:<channel>:<ts>". The app_mention and message copies of one post, the
// copies every installed app receives and Slack's retries all share it.
func DedupKey(team, channel, ts string) string {
	return "slack:" + team + ":" + channel + ":" + ts
}

// ThreadKey returns the openbot thread key of a message (DESIGN.md §3 table):
// "slack:<team>:<channel>:<root ts>" in channels (the root is threadTS when the
// message is a thread reply, else its own ts); in a DM "slack:<team>:<dm channel>",
// and a Slack thread inside the DM is its own thread "slack:<team>:<dm>:<thread_ts>".
func ThreadKey(team, channel, ts, threadTS string, dm bool) string {
	if dm {
		if threadTS == "" {
			return "slack:" + team + ":" + channel
		}
		return "slack:" + team + ":" + channel + ":" + threadTS
	}
	root := cmp.Or(threadTS, ts)
	return "slack:" + team + ":" + channel + ":" + root
}

// ReplyConversation returns where replies to a message go: the thread root in
// channels (thread_ts = root), the DM itself or the DM's Slack thread.
func ReplyConversation(team, channel, ts, threadTS string, dm bool) Conversation {
	if dm {
		return Conversation{Team: team, Channel: channel, ThreadTS: threadTS}
	}
	root := cmp.Or(threadTS, ts)
	return Conversation{Team: team, Channel: channel, ThreadTS: root}
}

// HumanActor is the core.ActorID of a Slack user: "slack:<team>:<user>".
func HumanActor(team, user string) core.ActorID {
	return core.ActorID("slack:" + team + ":" + user)
}

// AccountID is the core.AccountID of a Slack account named name: "slack/<name>".
func AccountID(name string) core.AccountID { return core.AccountID("slack/" + name) }

// isDMChannel reports whether a channel id or channel_type names a 1:1 DM.
func isDMChannel(channel, channelType string) bool {
	if channelType != "" {
		return channelType == "im"
	}
	return strings.HasPrefix(channel, "D")
}

var _ core.Channeler = (*Adapter)(nil)

// ChannelOf implements core.Channeler: a conversation's channel is
// "<team>:<channel>", whatever thread it is; a ref it cannot parse is its own.
func (a *Adapter) ChannelOf(ref core.ConversationRef) string {
	c, err := ParseConversation(ref)
	if err != nil {
		return string(ref)
	}
	return c.Team + ":" + c.Channel
}
