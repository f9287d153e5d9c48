package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
)

// The Open API operations the adapter uses, each one typed SDK call run through
// apiClient.do (token refresh, rate limits, error mapping).

// sentMessage is the part of a message create or reply answer the adapter reads.
type sentMessage struct {
	MessageID string
	RootID    string
	ParentID  string
	ThreadID  string
	ChatID    string
}

func str(p *string) string { return larkcore.StringValue(p) }

// createMessage sends a new message to receiveID (a chat_id or an open_id, per
// idType). uuid makes retries idempotent for an hour (at most 50 characters).
// https://open.feishu.cn/document/server-docs/im-v1/message/create
func (c *apiClient) createMessage(ctx context.Context, idType, receiveID, msgType, content, uuid string) (sentMessage, error) {
	b := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(receiveID).MsgType(msgType).Content(content)
	if uuid != "" {
		b.Uuid(uuid)
	}
	req := larkim.NewCreateMessageReqBuilder().ReceiveIdType(idType).Body(b.Build()).Build()
	var out sentMessage
	err := c.do(ctx, "im.message.create", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.Message.Create(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		if d := r.Data; d != nil {
			out = sentMessage{str(d.MessageId), str(d.RootId), str(d.ParentId), str(d.ThreadId), str(d.ChatId)}
		}
		return r.ApiResp, r.CodeError, nil
	})
	c.sent(err)
	return out, err
}

// replyMessage replies to messageID; inThread creates or continues its topic thread.
// https://open.feishu.cn/document/server-docs/im-v1/message/reply
func (c *apiClient) replyMessage(ctx context.Context, messageID, msgType, content string, inThread bool, uuid string) (sentMessage, error) {
	b := larkim.NewReplyMessageReqBodyBuilder().MsgType(msgType).Content(content).ReplyInThread(inThread)
	if uuid != "" {
		b.Uuid(uuid)
	}
	req := larkim.NewReplyMessageReqBuilder().MessageId(messageID).Body(b.Build()).Build()
	var out sentMessage
	err := c.do(ctx, "im.message.reply", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.Message.Reply(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		if d := r.Data; d != nil {
			out = sentMessage{str(d.MessageId), str(d.RootId), str(d.ParentId), str(d.ThreadId), str(d.ChatId)}
		}
		return r.ApiResp, r.CodeError, nil
	})
	c.sent(err)
	return out, err
}

// patchCard replaces the card of an interactive message this app sent (5 QPS per
// message, at most 14 days old).
// https://open.feishu.cn/document/server-docs/im-v1/message-card/patch
func (c *apiClient) patchCard(ctx context.Context, messageID, cardJSON string) error {
	req := larkim.NewPatchMessageReqBuilder().MessageId(messageID).
		Body(larkim.NewPatchMessageReqBodyBuilder().Content(cardJSON).Build()).Build()
	err := c.do(ctx, "im.message.patch", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.Message.Patch(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		return r.ApiResp, r.CodeError, nil
	})
	c.sent(err)
	return err
}

// sent records a post or edit the platform accepted (err == nil), for
// Adapter.LastPost.
func (c *apiClient) sent(err error) {
	if err == nil {
		c.posted.Store(time.Now().UnixNano())
	}
}

// deleteMessage recalls a message this app sent.
// https://open.feishu.cn/document/server-docs/im-v1/message/delete
func (c *apiClient) deleteMessage(ctx context.Context, messageID string) error {
	req := larkim.NewDeleteMessageReqBuilder().MessageId(messageID).Build()
	return c.do(ctx, "im.message.delete", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.Message.Delete(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		return r.ApiResp, r.CodeError, nil
	})
}

// addReaction puts emoji (an emoji_type such as "OnIt") on messageID and returns
// the reaction_id.
// https://open.feishu.cn/document/server-docs/im-v1/message-reaction/create
func (c *apiClient) addReaction(ctx context.Context, messageID, emoji string) (string, error) {
	req := larkim.NewCreateMessageReactionReqBuilder().MessageId(messageID).
		Body(larkim.NewCreateMessageReactionReqBodyBuilder().
			ReactionType(larkim.NewEmojiBuilder().EmojiType(emoji).Build()).Build()).Build()
	var id string
	err := c.do(ctx, "im.message.reaction.create", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.MessageReaction.Create(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		if r.Data != nil {
			id = str(r.Data.ReactionId)
		}
		return r.ApiResp, r.CodeError, nil
	})
	return id, err
}

// removeReaction deletes reaction reactionID from messageID.
// https://open.feishu.cn/document/server-docs/im-v1/message-reaction/delete
func (c *apiClient) removeReaction(ctx context.Context, messageID, reactionID string) error {
	req := larkim.NewDeleteMessageReactionReqBuilder().MessageId(messageID).ReactionId(reactionID).Build()
	return c.do(ctx, "im.message.reaction.delete", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.im.MessageReaction.Delete(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		return r.ApiResp, r.CodeError, nil
	})
}

// botInfo returns the app's bot open_id and name. The SDK has no typed method for
// bot/v3/info, so it goes through larkcore.Request.
// https://open.feishu.cn/document/client-docs/bot-v3/obtain-bot-info
func (c *apiClient) botInfo(ctx context.Context) (openID, name string, err error) {
	var out struct {
		Bot struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	err = c.do(ctx, "bot.info", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		resp, ce, err := c.raw(ctx, http.MethodGet, "/open-apis/bot/v3/info", nil, nil, tok)
		if err == nil && ce.Code == 0 {
			_ = json.Unmarshal(resp.RawBody, &out)
		}
		return resp, ce, err
	})
	if err != nil {
		return "", "", err
	}
	if out.Bot.OpenID == "" {
		return "", "", errors.New("feishu: bot.info: no open_id in response")
	}
	return out.Bot.OpenID, out.Bot.AppName, nil
}

// userName returns a user's display name. It needs the contact:user.base:readonly
// permission; callers fall back to the open_id when it fails.
// https://open.feishu.cn/document/server-docs/contact-v3/user/get
func (c *apiClient) userName(ctx context.Context, openID string) (string, error) {
	req := larkcontact.NewGetUserReqBuilder().UserId(openID).UserIdType("open_id").Build()
	var name string
	err := c.do(ctx, "contact.user.get", func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
		r, err := c.contact.User.Get(ctx, req, tok)
		if err != nil {
			return nil, larkcore.CodeError{}, err
		}
		if r.Data != nil && r.Data.User != nil {
			name = str(r.Data.User.Name)
		}
		return r.ApiResp, r.CodeError, nil
	})
	if err == nil && name == "" {
		err = errors.New("feishu: contact.user.get: empty name")
	}
	return name, err
}
