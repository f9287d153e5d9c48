package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"openbot/core"

	"openbot/internal/waitctx"
)

// apiClient calls the Open API through the official SDK (oapi-sdk-go v3): the SDK
// builds every request (typed im/v1 and contact/v3 services, or larkcore.Request for
// the calls it has no typed method for) and decodes every answer into its types.
// openbot keeps three things around it, each because the SDK falls short:
//
//   - the tenant_access_token cache: the SDK's cache is one process-wide map keyed
//     by app_id (two accounts or test servers with one app id would share tokens),
//     runs on the wall clock, and its one retry on 99991663 re-reads the same stale
//     token from that cache; here a refused token is dropped, fetched again (through
//     the SDK's self-built-app token request) and the call retried once;
//   - rate limits: the SDK does not retry them; call waits out a short
//     x-ogw-ratelimit-reset and returns longer ones as an APIError whose RetryAfter
//     the outbox honours;
//   - bounded I/O: every HTTP request gets defaultAPITimeout and a body limit of
//     maxResponseBytes for JSON, maxDownloadBytes for files (the SDK reads answers
//     without limit; a larger answer is an error), and a non-JSON error
//     page becomes an APIError with its status, never echoed into an error string.
//
// It is safe for concurrent use.
type apiClient struct {
	base      string
	appID     string
	appSecret string
	http      *http.Client
	clock     core.Clock
	log       *slog.Logger
	// sleep waits d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	sdk     *larkcore.Config // EnableTokenCache off: the token is ours (see above)
	im      *larkim.V1
	contact *larkcontact.V3

	posted atomic.Int64 // when a message create, reply or card patch last succeeded, in Unix nanoseconds
	// limited counts the answers that refused a call for frequency
	// (APIError.RateLimited), limitedFor sums the waits they asked for
	// (x-ogw-ratelimit-reset), in nanoseconds.
	limited, limitedFor atomic.Int64

	mu      sync.Mutex // guards token, expires; held while fetching so one fetch runs
	token   string
	expires time.Time
}

// newAPIClient configures the SDK for base (Feishu, Lark or a test server) over hc.
func newAPIClient(base, appID, appSecret string, hc *http.Client, clock core.Clock, log *slog.Logger) *apiClient {
	c := &apiClient{base: strings.TrimRight(base, "/"), appID: appID, appSecret: appSecret, http: hc, clock: clock, log: log, sleep: waitctx.Sleep}
	c.sdk = &larkcore.Config{
		BaseUrl:          c.base,
		AppId:            appID,
		AppSecret:        appSecret,
		AppType:          larkcore.AppTypeSelfBuilt,
		EnableTokenCache: false,
		HttpClient:       boundedHTTP{hc},
		Logger:           sdkLogger{log},
		LogLevel:         larkcore.LogLevelInfo,
		Source:           "openbot",
	}
	larkcore.NewLogger(c.sdk)
	larkcore.NewSerialization(c.sdk)
	larkcore.NewHttpClient(c.sdk)
	c.im, c.contact = larkim.New(c.sdk), larkcontact.New(c.sdk)
	return c
}

// boundedHTTP is the SDK's HttpClient: each request is bounded by defaultAPITimeout
// (and the caller's ctx), each answer body by maxResponseBytes, and an error status
// without a JSON body is returned as *APIError before the SDK could print the page.
type boundedHTTP struct{ c *http.Client }

func (b boundedHTTP) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), defaultAPITimeout)
	res, err := b.c.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	if res.StatusCode/100 != 2 && !strings.Contains(res.Header.Get("Content-Type"), "json") {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBytes))
		res.Body.Close()
		cancel()
		e := &APIError{HTTPStatus: res.StatusCode, Msg: "non-JSON response"}
		e.retryAfter, e.waitGiven = resetHeader(res.Header)
		return nil, e
	}
	limit := int64(maxResponseBytes)
	if !strings.Contains(res.Header.Get("Content-Type"), "json") {
		limit = maxDownloadBytes // a file or image (message resource download)
	}
	res.Body = &cancelBody{r: res.Body, left: limit, cancel: cancel}
	return res, nil
}

// cancelBody ends the request's timeout when closed and fails a read past left
// bytes with errTooLarge, so an oversized answer is an error, never cut silently.
type cancelBody struct {
	r      io.ReadCloser
	left   int64
	cancel context.CancelFunc
}

var errTooLarge = errors.New("feishu: answer larger than the limit")

func (b *cancelBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.r.Close()
	b.cancel()
	return err
}

// resetHeader reads x-ogw-ratelimit-reset (seconds until the limit resets).
func resetHeader(h http.Header) (time.Duration, bool) {
	if s := h.Get("x-ogw-ratelimit-reset"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// apiError maps one SDK outcome onto nil, *APIError (a core.DeliveryError) or a
// wrapped transport error, and counts a rate limit (RateLimited); every call
// the client makes ends here. resp is the SDK's raw answer, ce its decoded
// {code, msg}.
func (c *apiClient) apiError(op string, resp *larkcore.ApiResp, ce larkcore.CodeError, err error) error {
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			ae.Op = op
			c.countLimit(ae)
			return ae
		}
		return fmt.Errorf("feishu: %s: %w", op, err)
	}
	if resp == nil {
		return fmt.Errorf("feishu: %s: no response", op)
	}
	if ce.Code == 0 && resp.StatusCode/100 == 2 {
		return nil
	}
	e := &APIError{Op: op, HTTPStatus: resp.StatusCode, Code: ce.Code, Msg: ce.Msg, LogID: resp.RequestId()}
	if ce.Err != nil && ce.Err.LogID != "" {
		e.LogID = ce.Err.LogID
	}
	e.retryAfter, e.waitGiven = resetHeader(resp.Header)
	c.countLimit(e)
	return e
}

// countLimit adds e to RateLimited's figures when it is a rate limit.
func (c *apiClient) countLimit(e *APIError) {
	if e.RateLimited() {
		c.limited.Add(1)
		c.limitedFor.Add(int64(e.retryAfter))
	}
}

// tenantToken returns a cached tenant_access_token, fetching a new one through the
// SDK's self-built-app token request when there is none, it expires within
// tokenRefreshMargin, or stale equals the cached token (the server just refused it).
// https://open.feishu.cn/document/server-docs/authentication-management/access-token/tenant_access_token_internal
func (c *apiClient) tenantToken(ctx context.Context, stale string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.token != stale && c.clock.Now().Before(c.expires) {
		return c.token, nil
	}
	const op = "auth.tenant_access_token"
	resp, err := larkcore.Request(ctx, &larkcore.ApiReq{
		HttpMethod:                http.MethodPost,
		ApiPath:                   larkcore.TenantAccessTokenInternalUrlPath,
		Body:                      &larkcore.SelfBuiltTenantAccessTokenReq{AppID: c.appID, AppSecret: c.appSecret},
		SupportedAccessTokenTypes: []larkcore.AccessTokenType{larkcore.AccessTokenTypeNone},
	}, c.sdk)
	var tr larkcore.TenantAccessTokenResp
	if err == nil {
		if jerr := json.Unmarshal(resp.RawBody, &tr); jerr != nil {
			tr.Code, tr.Msg = -1, "non-JSON response"
		}
	}
	if err := c.apiError(op, resp, tr.CodeError, err); err != nil {
		return "", err
	}
	if tr.TenantAccessToken == "" {
		return "", &APIError{Op: op, HTTPStatus: resp.StatusCode, Code: -1, Msg: "empty tenant_access_token"}
	}
	ttl := time.Duration(tr.Expire) * time.Second
	if ttl > 2*tokenRefreshMargin {
		ttl -= tokenRefreshMargin
	} else {
		ttl /= 2
	}
	c.token, c.expires = tr.TenantAccessToken, c.clock.Now().Add(ttl)
	return c.token, nil
}

// sendFunc performs one SDK call with the given token option and returns the SDK's
// raw answer and decoded {code, msg} (or its error).
type sendFunc func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error)

// do performs an authenticated SDK call. An invalid-token answer refreshes the token
// and retries once; a rate limit whose wait is at most maxInlineRateWait is waited
// out and retried up to maxRateLimitedRetries times, with doubling backoff when the
// server gave no wait. Other failures return *APIError (or a transport error). Any
// typed SDK call (uploads and downloads included) can go through do.
func (c *apiClient) do(ctx context.Context, op string, send sendFunc) error {
	refreshed := false
	rateRetries := 0
	stale := ""
	for {
		tok, err := c.tenantToken(ctx, stale)
		if err != nil {
			return err
		}
		resp, ce, err := send(ctx, larkcore.WithTenantAccessToken(tok))
		err = c.apiError(op, resp, ce, err)
		var ae *APIError
		switch {
		case err == nil:
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

// raw performs one larkcore.Request for an Open API path the SDK has no typed
// method for, decoding the {code, msg} head from the JSON answer.
func (c *apiClient) raw(ctx context.Context, method, path string, query url.Values, body any, tok larkcore.RequestOptionFunc, extra ...larkcore.RequestOptionFunc) (*larkcore.ApiResp, larkcore.CodeError, error) {
	types := []larkcore.AccessTokenType{larkcore.AccessTokenTypeNone}
	opts := extra
	if tok != nil {
		types = []larkcore.AccessTokenType{larkcore.AccessTokenTypeTenant}
		opts = append([]larkcore.RequestOptionFunc{tok}, extra...)
	}
	resp, err := larkcore.Request(ctx, &larkcore.ApiReq{
		HttpMethod: method, ApiPath: path, Body: body, QueryParams: larkcore.QueryParams(query),
		PathParams: larkcore.PathParams{}, SupportedAccessTokenTypes: types,
	}, c.sdk, opts...)
	var ce larkcore.CodeError
	if err == nil && json.Unmarshal(resp.RawBody, &ce) != nil {
		ce.Code, ce.Msg = -1, "non-JSON response"
	}
	return resp, ce, err
}

// doJSONHeaders POSTs body with extra headers and no token (long-connection
// endpoint discovery) and decodes the whole JSON answer into out.
func (c *apiClient) doJSONHeaders(ctx context.Context, op, path string, hdr map[string]string, body, out any) error {
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	resp, ce, err := c.raw(ctx, http.MethodPost, path, nil, body, nil, larkcore.WithHeaders(h))
	if err := c.apiError(op, resp, ce, err); err != nil {
		return err
	}
	if err := json.Unmarshal(resp.RawBody, out); err != nil {
		return fmt.Errorf("feishu: %s: decoding response: %w", op, err)
	}
	return nil
}
