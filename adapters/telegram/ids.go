package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"openbot/core"
)

// Platform is the binding platform name of Telegram conversations.
const Platform = "telegram"

// ErrBadConversation is returned by ParseConversation (and so by Adapter.Deliver) for
// a ConversationRef that this adapter did not build.
var ErrBadConversation = errors.New("telegram: malformed conversation ref")

// Conversation is a parsed Telegram conversation reference: where replies of one
// openbot thread go (DESIGN.md §3 "Where replies go"). Topic is the forum topic's
// message_thread_id, 0 for a private chat, a plain group or a forum's General topic
// (which is addressed by omitting message_thread_id).
type Conversation struct {
	Chat  int64 // chat id; supergroups are negative ("-100…")
	Topic int64 // forum topic message_thread_id, 0 for none
}

// Ref encodes c as an opaque core.ConversationRef: "<chat>" or "<chat>:topic:<id>".
func (c Conversation) Ref() core.ConversationRef {
	if c.Topic == 0 {
		return core.ConversationRef(strconv.FormatInt(c.Chat, 10))
	}
	return core.ConversationRef(strconv.FormatInt(c.Chat, 10) + ":topic:" + strconv.FormatInt(c.Topic, 10))
}

// ThreadKey is the openbot thread key of the conversation as bot (the account's
// bot user id) sees it (DESIGN.md §3 table): "telegram:<chat>" for a group's
// current dialog, "telegram:<chat>:topic:<id>" for a forum topic, and
// "telegram:<bot>:<chat>" for a private chat. A private chat's id is the user's id
// whichever bot they talk to, so two bot accounts' DMs with one person must not
// share a key; private chat ids are positive, group ids negative.
func (c Conversation) ThreadKey(bot int64) string {
	if c.Chat > 0 {
		return "telegram:" + strconv.FormatInt(bot, 10) + ":" + string(c.Ref())
	}
	return "telegram:" + string(c.Ref())
}

// ParseConversation decodes a ref built by Conversation.Ref. It returns
// ErrBadConversation for any other shape, a zero chat id or a non-positive topic.
func ParseConversation(ref core.ConversationRef) (Conversation, error) {
	chatS, topicS, hasTopic := strings.Cut(string(ref), ":topic:")
	chat, err := strconv.ParseInt(chatS, 10, 64)
	if err != nil || chat == 0 {
		return Conversation{}, ErrBadConversation
	}
	c := Conversation{Chat: chat}
	if hasTopic {
		topic, err := strconv.ParseInt(topicS, 10, 64)
		if err != nil || topic <= 0 {
			return Conversation{}, ErrBadConversation
		}
		c.Topic = topic
	}
	return c, nil
}

// DedupKey is the platform identity of one Telegram message as bot (the account's
// bot user id) receives it (DESIGN.md §3): "telegram:<chat>:<message_id>" in a
// group, where message_id is unique per chat, so the copies two bot accounts in one
// group receive, and redelivered updates, share it; "telegram:<bot>:<chat>:<id>" in
// a private chat (positive chat id), where each bot's chat with the person counts
// its own message ids.
func DedupKey(bot, chat, messageID int64) string {
	if chat > 0 {
		return "telegram:" + strconv.FormatInt(bot, 10) + ":" + strconv.FormatInt(chat, 10) + ":" + strconv.FormatInt(messageID, 10)
	}
	return "telegram:" + strconv.FormatInt(chat, 10) + ":" + strconv.FormatInt(messageID, 10)
}

// HumanActor is the core.ActorID of a Telegram user: "telegram:<user id>".
func HumanActor(userID int64) core.ActorID {
	return core.ActorID("telegram:" + strconv.FormatInt(userID, 10))
}

// AccountID is the core.AccountID of a Telegram account named name: "telegram/<name>".
func AccountID(name string) core.AccountID { return core.AccountID("telegram/" + name) }

// CursorName is the name under which an account's polling offset is persisted
// through Cursors: "telegram/<name>/offset".
func CursorName(name string) string { return "telegram/" + name + "/offset" }

// MaxCallbackData is the Bot API limit on an inline button's callback_data, in
// bytes (core.telegram.org/bots/api#inlinekeyboardbutton).
const MaxCallbackData = 64

// maxToken bounds a question token in callback_data; core's tokens are 12
// lowercase base32 characters (core.Question.Token: at most 16 ASCII characters).
const maxToken = 32

// ErrBadCallback is returned by CallbackData for a token or choice that cannot be
// encoded within MaxCallbackData bytes.
var ErrBadCallback = errors.New("telegram: question token or choice cannot be encoded as callback_data")

// CallbackData encodes a question button (DESIGN.md §5): "q:<token>:<index>",
// where token is core.Question.Token and index the option's index in
// Question.Options(). Only ASCII letters, digits, '_' and '-' are allowed in the
// token, so the result is at most 2+32+1+4 = 39 bytes whatever the question's text
// or language; anything else returns ErrBadCallback.
func CallbackData(token string, choice int) (string, error) {
	if !validToken(token) || choice < 0 || choice > 9999 {
		return "", ErrBadCallback
	}
	s := "q:" + token + ":" + strconv.Itoa(choice)
	if len(s) > MaxCallbackData {
		return "", ErrBadCallback
	}
	return s, nil
}

// ParseCallbackData decodes data built by CallbackData; ok is false for anything
// else (buttons of other software, older formats, tampered data).
func ParseCallbackData(data string) (token string, choice int, ok bool) {
	rest, found := strings.CutPrefix(data, "q:")
	if !found || len(data) > MaxCallbackData {
		return "", 0, false
	}
	token, idx, found := strings.Cut(rest, ":")
	if !found || !validToken(token) || idx == "" || len(idx) > 4 {
		return "", 0, false
	}
	for _, c := range idx {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	choice, err := strconv.Atoi(idx)
	if err != nil {
		return "", 0, false
	}
	return token, choice, true
}

func validToken(t string) bool {
	if t == "" || len(t) > maxToken {
		return false
	}
	for _, c := range t {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

var _ core.DirectOpener = (*Adapter)(nil)

// DirectConversation implements core.DirectOpener: a person's private chat
// with this bot has the person's user id as its chat id. Telegram delivers
// there only after the person has started the bot.
func (a *Adapter) DirectConversation(_ context.Context, actor core.ActorID, _ string) (core.ConversationRef, string, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(string(actor), "telegram:"), 10, 64)
	if err != nil || id <= 0 || !strings.HasPrefix(string(actor), "telegram:") {
		return "", "", fmt.Errorf("telegram: %q is not a Telegram user", actor)
	}
	me, ok := a.Self()
	if !ok {
		return "", "", errNotReady
	}
	c := Conversation{Chat: id}
	return c.Ref(), c.ThreadKey(me.ID), nil
}
