package feishu

import (
	"fmt"
	"net/http"
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
	CodeNoPermission      = 99991672 // the app lacks the API's scope: permanent
	CodeSystemBusy        = 1        // long-connection endpoint: retry
	CodeEndpointInternal  = 1000040343
	CodeEndpointTooMany   = 1000040350 // long-connection limit (50 per app) exceeded
	defaultAPITimeout     = 10 * time.Second
	maxResponseBytes      = 1 << 20   // a JSON answer
	maxDownloadBytes      = 100 << 20 // a file or image answer (Feishu's file limit is 100 MB)
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
