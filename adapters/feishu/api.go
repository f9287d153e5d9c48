package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"openbot/core"
)

// Open API error codes the client acts on (fixtures feishu/API_NOTES.md "Errors and
// rate limits", https://open.feishu.cn/document/server-docs/api-call-guide/generic-error-code).
const (
	CodeInvalidToken      = 99991663 // tenant_access_token invalid or expired: refresh and retry once
	CodeInvalidTokenAlt   = 99991661 // token missing or malformed: same handling
	CodeRateLimited       = 99991400 // request frequency limit: wait x-ogw-ratelimit-reset
	CodeMessageRateLimit  = 230020   // per-chat message frequency limit
	CodeBotNotInChat      = 230002   // the bot is not a member of the chat
	CodeNoAvailability    = 230013   // the user is outside the bot's availability
	CodeInvalidContent    = 230001   // invalid message content (a card the server rejects)
	CodeInvalidRequest    = 230099   // invalid request or card content
	CodeSystemBusy        = 1        // long-connection endpoint: retry
	CodeEndpointInternal  = 1000040343
	CodeEndpointTooMany   = 1000040350 // long-connection limit (50 per app) exceeded
	defaultAPITimeout     = 10 * time.Second
	maxResponseBytes      = 1 << 20
	tokenRefreshMargin    = 3 * time.Minute
	maxInlineRateWait     = 5 * time.Second
	maxRateLimitedRetries = 2
)

// APIError is a failed Open API call: a non-zero {code, msg} body or a non-2xx
// status. It implements core.DeliveryError: rate limits and server errors are
// temporary (RetryAfter is the server's x-ogw-ratelimit-reset when given), other
// client errors (bot not in chat, invalid content, bad credentials) are Permanent.
type APIError struct {
	Op         string // "im.message.create", "im.message.reply", ...
	HTTPStatus int
	Code       int
	Msg        string
	LogID      string
	retryAfter time.Duration
	waitGiven  bool // the server sent x-ogw-ratelimit-reset (possibly 0)
}

var _ core.DeliveryError = (*APIError)(nil)

func (e *APIError) Error() string {
	s := fmt.Sprintf("feishu: %s: http %d code %d: %s", e.Op, e.HTTPStatus, e.Code, e.Msg)
	if e.LogID != "" {
		s += " (log_id " + e.LogID + ")"
	}
	return s
}

// RateLimited reports whether the platform refused the call for frequency.
func (e *APIError) RateLimited() bool {
	return e.Code == CodeRateLimited || e.Code == CodeMessageRateLimit || e.HTTPStatus == http.StatusTooManyRequests
}

// Permanent reports whether retrying cannot help: any client error other than a rate
// limit or an invalid token.
func (e *APIError) Permanent() bool {
	if e.RateLimited() || e.HTTPStatus >= 500 || e.Code == CodeSystemBusy || e.invalidToken() {
		return false
	}
	return true
}

// RetryAfter is how long the platform asked us to wait, 0 when it did not say.
func (e *APIError) RetryAfter() time.Duration { return e.retryAfter }

func (e *APIError) invalidToken() bool {
	return e.Code == CodeInvalidToken || e.Code == CodeInvalidTokenAlt
}

// rejectedContent reports whether the server refused the message content (a card
// it cannot render), so a plain-text fallback may succeed.
func (e *APIError) rejectedContent() bool {
	return e.Code == CodeInvalidContent || e.Code == CodeInvalidRequest
}

// apiClient calls the Open API with a cached tenant_access_token. It is safe for
// concurrent use.
type apiClient struct {
	base      string
	appID     string
	appSecret string
	http      *http.Client
	clock     core.Clock
	log       *slog.Logger
	// sleep waits d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex // guards token, expires; held while fetching so one fetch runs
	token   string
	expires time.Time
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// tenantToken returns a cached tenant_access_token, fetching a new one when there is
// none, it expires within tokenRefreshMargin, or stale equals the cached token (the
// server just refused it).
// https://open.feishu.cn/document/server-docs/authentication-management/access-token/tenant_access_token_internal
func (c *apiClient) tenantToken(ctx context.Context, stale string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.token != stale && c.clock.Now().Before(c.expires) {
		return c.token, nil
	}
	var resp struct {
		Code   int    `json:"code"`
		Msg    string `json:"msg"`
		Token  string `json:"tenant_access_token"`
		Expire int    `json:"expire"` // seconds
	}
	body := map[string]string{"app_id": c.appID, "app_secret": c.appSecret}
	if err := c.doJSON(ctx, "auth.tenant_access_token", http.MethodPost, "/open-apis/auth/v3/tenant_access_token/internal", nil, "", body, &resp); err != nil {
		return "", err
	}
	if resp.Token == "" {
		return "", &APIError{Op: "auth.tenant_access_token", HTTPStatus: 200, Code: -1, Msg: "empty tenant_access_token"}
	}
	ttl := time.Duration(resp.Expire) * time.Second
	if ttl > 2*tokenRefreshMargin {
		ttl -= tokenRefreshMargin
	} else {
		ttl /= 2
	}
	c.token, c.expires = resp.Token, c.clock.Now().Add(ttl)
	return c.token, nil
}

// call performs an authenticated Open API call and decodes the response's "data"
// into out (may be nil). An invalid-token error refreshes the token and retries once;
// a rate limit whose wait is at most maxInlineRateWait is waited out and retried up
// to maxRateLimitedRetries times, with doubling backoff when the server gave no
// wait. Other failures return *APIError (or a transport error).
func (c *apiClient) call(ctx context.Context, op, method, path string, query url.Values, body, out any) error {
	refreshed := false
	rateRetries := 0
	stale := ""
	for {
		tok, err := c.tenantToken(ctx, stale)
		if err != nil {
			return err
		}
		var resp struct {
			Code int             `json:"code"`
			Msg  string          `json:"msg"`
			Data json.RawMessage `json:"data"`
		}
		err = c.doJSON(ctx, op, method, path, query, tok, body, &resp)
		var ae *APIError
		switch {
		case err == nil:
			if out != nil && len(resp.Data) > 0 {
				if err := json.Unmarshal(resp.Data, out); err != nil {
					return fmt.Errorf("feishu: %s: decoding data: %w", op, err)
				}
			}
			return nil
		case errors.As(err, &ae) && ae.invalidToken() && !refreshed:
			c.log.Info("feishu tenant token refused; refreshing", "op", op, "code", ae.Code)
			refreshed, stale = true, tok
			continue
		case errors.As(err, &ae) && ae.RateLimited() && rateRetries < maxRateLimitedRetries:
			wait := ae.retryAfter
			if !ae.waitGiven {
				wait = time.Second << rateRetries
			}
			if wait > maxInlineRateWait {
				return err
			}
			rateRetries++
			c.log.Warn("feishu rate limited; waiting", "op", op, "wait", wait)
			if err := c.sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// doJSON sends one request with a JSON body and decodes the JSON answer into out.
// Any non-2xx status or non-zero "code" is returned as *APIError. The request is
// bounded by defaultAPITimeout and ctx.
func (c *apiClient) doJSON(ctx context.Context, op, method, path string, query url.Values, token string, body, out any) error {
	var hdr map[string]string
	if token != "" {
		hdr = map[string]string{"Authorization": "Bearer " + token}
	}
	return c.do(ctx, op, method, path, query, hdr, body, out)
}

// doJSONHeaders POSTs body with extra headers and no token (long-connection
// endpoint discovery).
func (c *apiClient) doJSONHeaders(ctx context.Context, op, path string, hdr map[string]string, body, out any) error {
	return c.do(ctx, op, http.MethodPost, path, nil, hdr, body, out)
}

func (c *apiClient) do(ctx context.Context, op, method, path string, query url.Values, hdr map[string]string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, defaultAPITimeout)
	defer cancel()
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("feishu: %s: %w", op, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("feishu: %s: reading response: %w", op, err)
	}
	var head struct {
		Code  int    `json:"code"`
		Msg   string `json:"msg"`
		Error struct {
			LogID string `json:"log_id"`
		} `json:"error"`
	}
	jsonErr := json.Unmarshal(raw, &head)
	if jsonErr != nil || head.Code != 0 || res.StatusCode/100 != 2 {
		e := &APIError{Op: op, HTTPStatus: res.StatusCode, Code: head.Code, Msg: head.Msg, LogID: head.Error.LogID}
		if jsonErr != nil && e.Msg == "" {
			e.Msg = "non-JSON response"
		}
		if s := res.Header.Get("x-ogw-ratelimit-reset"); s != "" {
			if n, err := strconv.Atoi(s); err == nil && n >= 0 {
				e.retryAfter, e.waitGiven = time.Duration(n)*time.Second, true
			}
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("feishu: %s: decoding response: %w", op, err)
		}
	}
	return nil
}

// sentMessage is the "data" of a message create or reply response.
type sentMessage struct {
	MessageID string `json:"message_id"`
	RootID    string `json:"root_id"`
	ParentID  string `json:"parent_id"`
	ThreadID  string `json:"thread_id"`
	ChatID    string `json:"chat_id"`
}

// createMessage sends a new message to receiveID (a chat_id or an open_id, per
// idType). uuid makes retries idempotent for an hour (at most 50 characters).
// https://open.feishu.cn/document/server-docs/im-v1/message/create
func (c *apiClient) createMessage(ctx context.Context, idType, receiveID, msgType, content, uuid string) (sentMessage, error) {
	body := map[string]any{"receive_id": receiveID, "msg_type": msgType, "content": content}
	if uuid != "" {
		body["uuid"] = uuid
	}
	var out sentMessage
	err := c.call(ctx, "im.message.create", http.MethodPost, "/open-apis/im/v1/messages", url.Values{"receive_id_type": {idType}}, body, &out)
	return out, err
}

// replyMessage replies to messageID; inThread creates or continues its topic thread.
// https://open.feishu.cn/document/server-docs/im-v1/message/reply
func (c *apiClient) replyMessage(ctx context.Context, messageID, msgType, content string, inThread bool, uuid string) (sentMessage, error) {
	body := map[string]any{"msg_type": msgType, "content": content, "reply_in_thread": inThread}
	if uuid != "" {
		body["uuid"] = uuid
	}
	var out sentMessage
	err := c.call(ctx, "im.message.reply", http.MethodPost, "/open-apis/im/v1/messages/"+url.PathEscape(messageID)+"/reply", nil, body, &out)
	return out, err
}

// patchCard replaces the card of an interactive message this app sent (5 QPS per
// message, at most 14 days old).
// https://open.feishu.cn/document/server-docs/im-v1/message-card/patch
func (c *apiClient) patchCard(ctx context.Context, messageID, cardJSON string) error {
	return c.call(ctx, "im.message.patch", http.MethodPatch, "/open-apis/im/v1/messages/"+url.PathEscape(messageID), nil, map[string]string{"content": cardJSON}, nil)
}

// botInfo returns the app's bot open_id and name.
// https://open.feishu.cn/document/client-docs/bot-v3/obtain-bot-info
func (c *apiClient) botInfo(ctx context.Context) (openID, name string, err error) {
	tok, err := c.tenantToken(ctx, "")
	if err != nil {
		return "", "", err
	}
	var resp struct {
		Bot struct {
			OpenID  string `json:"open_id"`
			AppName string `json:"app_name"`
		} `json:"bot"`
	}
	if err := c.doJSON(ctx, "bot.info", http.MethodGet, "/open-apis/bot/v3/info", nil, tok, nil, &resp); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.invalidToken() {
			if tok, err = c.tenantToken(ctx, tok); err == nil {
				err = c.doJSON(ctx, "bot.info", http.MethodGet, "/open-apis/bot/v3/info", nil, tok, nil, &resp)
			}
		}
		if err != nil {
			return "", "", err
		}
	}
	if resp.Bot.OpenID == "" {
		return "", "", errors.New("feishu: bot.info: no open_id in response")
	}
	return resp.Bot.OpenID, resp.Bot.AppName, nil
}

// userName returns a user's display name. It needs the contact:user.base:readonly
// permission; callers fall back to the open_id when it fails.
// https://open.feishu.cn/document/server-docs/contact-v3/user/get
func (c *apiClient) userName(ctx context.Context, openID string) (string, error) {
	var out struct {
		User struct {
			Name string `json:"name"`
		} `json:"user"`
	}
	err := c.call(ctx, "contact.user.get", http.MethodGet, "/open-apis/contact/v3/users/"+url.PathEscape(openID), url.Values{"user_id_type": {"open_id"}}, nil, &out)
	if err == nil && out.User.Name == "" {
		err = errors.New("feishu: contact.user.get: empty name")
	}
	return out.User.Name, err
}
