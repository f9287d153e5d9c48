package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// The Bot API types below cover what telegram-bot-api v5.5.1 lacks: forum topics
// (Bot API 6.3: message_thread_id, is_topic_message, forum_topic_created). Users and
// entities use the library's types.

// update is one Bot API Update (core.telegram.org/bots/api#update). Exactly one of the
// optional fields is set; openbot handles message and callback_query and ignores the
// rest (edited_message must not start a second run).
type update struct {
	UpdateID      int64          `json:"update_id"`
	Message       *message       `json:"message,omitempty"`
	EditedMessage *message       `json:"edited_message,omitempty"`
	CallbackQuery *callbackQuery `json:"callback_query,omitempty"`
}

// message is a Bot API Message with the forum-topic fields.
type message struct {
	MessageID         int64                    `json:"message_id"`
	MessageThreadID   int64                    `json:"message_thread_id,omitempty"`
	IsTopicMessage    bool                     `json:"is_topic_message,omitempty"`
	From              *tgbotapi.User           `json:"from,omitempty"`
	Chat              tgbotapi.Chat            `json:"chat"`
	Date              int64                    `json:"date"`
	Text              string                   `json:"text,omitempty"`
	Entities          []tgbotapi.MessageEntity `json:"entities,omitempty"`
	Caption           string                   `json:"caption,omitempty"`
	CaptionEntities   []tgbotapi.MessageEntity `json:"caption_entities,omitempty"`
	ReplyToMessage    *message                 `json:"reply_to_message,omitempty"`
	ForumTopicCreated json.RawMessage          `json:"forum_topic_created,omitempty"`
	// Files (adapters/telegram/files.go); Photo lists the sizes of one photo.
	Photo    []fileMeta `json:"photo,omitempty"`
	Document *fileMeta  `json:"document,omitempty"`
	Voice    *fileMeta  `json:"voice,omitempty"`
	Audio    *fileMeta  `json:"audio,omitempty"`
	Video    *fileMeta  `json:"video,omitempty"`
}

// callbackQuery is an inline-button click (core.telegram.org/bots/api#callbackquery).
type callbackQuery struct {
	ID      string        `json:"id"`
	From    tgbotapi.User `json:"from"`
	Message *message      `json:"message,omitempty"`
	Data    string        `json:"data,omitempty"`
}

// replyParameters is sendMessage's reply_parameters (Bot API 7.0).
type replyParameters struct {
	MessageID                int64 `json:"message_id"`
	AllowSendingWithoutReply bool  `json:"allow_sending_without_reply,omitempty"`
}

// requestTimeout bounds every Bot API call except getUpdates, which gets its long-poll
// timeout plus this much.
const requestTimeout = 30 * time.Second

// ctxDoer adapts the library's context-free MakeRequest: it lives for one call only
// and attaches that call's context to the request, so cancellation and deadlines
// reach the HTTP transport. It is the one place a context sits in a struct.
type ctxDoer struct {
	ctx context.Context
	hc  *http.Client
}

func (d ctxDoer) Do(r *http.Request) (*http.Response, error) { return d.hc.Do(r.WithContext(d.ctx)) }

// call invokes one Bot API method through the library's MakeRequest (form-encoded
// Params, nested objects as JSON strings) and returns the raw result. It honours ctx
// and bounds the call by timeout. Bot API errors come back as *APIError; transport
// errors are returned with the token redacted.
func (a *Adapter) call(ctx context.Context, method string, params tgbotapi.Params, timeout time.Duration) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bot := &tgbotapi.BotAPI{Token: a.token, Client: ctxDoer{ctx: ctx, hc: a.hc}}
	bot.SetAPIEndpoint(a.endpoint)
	resp, err := bot.MakeRequest(method, params)
	if err != nil {
		var te *tgbotapi.Error
		if errors.As(err, &te) {
			if te.RetryAfter > 0 {
				a.limited.Add(1)
				a.limitedFor.Add(int64(te.RetryAfter) * int64(time.Second))
			}
			return nil, &APIError{Method: method, Code: te.Code, Description: te.Message,
				RetryAfterSeconds: te.RetryAfter, MigrateToChatID: te.MigrateToChatID}
		}
		return nil, a.redact(fmt.Errorf("telegram %s: %w", method, err))
	}
	if method == "sendMessage" || method == "editMessageText" || method == "sendDocument" || method == "sendPhoto" {
		a.posted.Store(time.Now().UnixNano())
	}
	return resp.Result, nil
}

// redactedError hides the bot token, which is part of every Bot API URL, from error
// text that may be logged (DESIGN.md §9).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (a *Adapter) redact(err error) error {
	if err == nil || a.token == "" || !strings.Contains(err.Error(), a.token) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), a.token, "<token>"), err: err}
}

// APIError is a Bot API error answer ({"ok":false,"error_code":…}). It implements
// core.DeliveryError: 429 asks to wait RetryAfterSeconds (parameters.retry_after);
// 400 (bad request, chat not found), 401, 403 (bot blocked or kicked) and 404 are
// permanent; everything else is retried with backoff.
type APIError struct {
	Method            string
	Code              int    // error_code, equal to the HTTP status
	Description       string // informational; switch on Code and parameters
	RetryAfterSeconds int    // parameters.retry_after, on 429
	MigrateToChatID   int64  // parameters.migrate_to_chat_id, when a group became a supergroup
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// Permanent reports whether retrying the same request cannot succeed.
func (e *APIError) Permanent() bool {
	switch e.Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

// RetryAfter is parameters.retry_after as a duration; 0 when Telegram gave none.
func (e *APIError) RetryAfter() time.Duration {
	return time.Duration(e.RetryAfterSeconds) * time.Second
}

// cantParseEntities reports Telegram's answer to malformed HTML.
func (e *APIError) cantParseEntities() bool {
	return e.Code == http.StatusBadRequest && strings.Contains(strings.ToLower(e.Description), "can't parse entities")
}
