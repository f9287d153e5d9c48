package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// sdkFake is a minimal Open API for the SDK path: tokens "t-<n>", a message create
// endpoint that answers the scripted replies in order, then success.
type sdkFake struct {
	mu      sync.Mutex
	fetches int
	sends   []string // Authorization header of each create
	script  []func(w http.ResponseWriter)
}

func (f *sdkFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/open-apis/auth/v3/tenant_access_token/internal":
		f.fetches++
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"code": 0, "msg": "ok", "expire": 7200, "tenant_access_token": "t-" + strings.Repeat("x", 10) + string(rune('0'+f.fetches))})
	case "/open-apis/im/v1/messages":
		f.sends = append(f.sends, r.Header.Get("Authorization"))
		if len(f.script) > 0 {
			s := f.script[0]
			f.script = f.script[1:]
			s(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"code":0,"msg":"success","data":{"message_id":"om_1","chat_id":"oc_1"}}`))
	default:
		http.NotFound(w, r)
	}
}

func jsonAnswer(status, code int, hdr map[string]string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"code": code, "msg": "scripted", "error": map[string]string{"log_id": "L1"}})
	}
}

func newSDKClient(t *testing.T, f *sdkFake) (*apiClient, *[]time.Duration) {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := newAPIClient(srv.URL, "cli_1", "s", srv.Client(), systemClock{}, slog.New(slog.DiscardHandler))
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }
	return c, &slept
}

// TestSDKTokenRefusedRefreshedOnce: a 99991663 answer through the SDK path fetches
// a new token and retries once with it; the stale token is never sent twice.
func TestSDKTokenRefusedRefreshedOnce(t *testing.T) {
	f := &sdkFake{script: []func(http.ResponseWriter){jsonAnswer(400, CodeInvalidToken, nil)}}
	c, _ := newSDKClient(t, f)
	m, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, "")
	if err != nil || m.MessageID != "om_1" || m.ChatID != "oc_1" {
		t.Fatalf("createMessage = %+v, %v", m, err)
	}
	if f.fetches != 2 || len(f.sends) != 2 || f.sends[0] == f.sends[1] {
		t.Errorf("fetches %d, sends %q: want 2 fetches and 2 sends with different tokens", f.fetches, f.sends)
	}
}

// TestSDKRateLimitWaitsHeaderReset: a rate-limit answer is retried after the reset
// the x-ogw-ratelimit-reset header gives; a reset beyond maxInlineRateWait is
// returned as a temporary DeliveryError with that RetryAfter.
func TestSDKRateLimitWaitsHeaderReset(t *testing.T) {
	f := &sdkFake{script: []func(http.ResponseWriter){
		jsonAnswer(429, CodeRateLimited, map[string]string{"x-ogw-ratelimit-reset": "2"}),
	}}
	c, slept := newSDKClient(t, f)
	if _, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, ""); err != nil {
		t.Fatal(err)
	}
	if len(*slept) != 1 || (*slept)[0] != 2*time.Second || len(f.sends) != 2 {
		t.Errorf("slept %v, %d sends; want one 2s wait and a retry", *slept, len(f.sends))
	}
	f.script = append(f.script, jsonAnswer(200, CodeMessageRateLimit, map[string]string{"x-ogw-ratelimit-reset": "30"}))
	_, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, "")
	var de core.DeliveryError
	if !errors.As(err, &de) || de.Permanent() || de.RetryAfter() != 30*time.Second {
		t.Errorf("long limit: %v, want temporary with RetryAfter 30s", err)
	}
	// A gateway's 429 page that is not JSON counts as well.
	f.script = append(f.script, func(w http.ResponseWriter) {
		w.Header().Set("x-ogw-ratelimit-reset", "60")
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte("<html>too many requests</html>"))
	})
	if _, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, ""); !errors.As(err, &de) || de.RetryAfter() != time.Minute {
		t.Errorf("a 429 page: %v, want temporary with RetryAfter 60s", err)
	}
	if n, d := c.limited.Load(), time.Duration(c.limitedFor.Load()); n != 3 || d != 92*time.Second {
		t.Errorf("counted %d rate limits asking %s, want 3 asking 92s (2s + 30s + 60s)", n, d)
	}
}

// TestSDKErrorsMapToDeliveryError maps typed SDK answers onto core.DeliveryError.
func TestSDKErrorsMapToDeliveryError(t *testing.T) {
	html := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("<html>secret upstream page</html>"))
	}
	tests := []struct {
		name      string
		answer    func(http.ResponseWriter)
		permanent bool
	}{
		{"no permission", jsonAnswer(400, CodeNoPermission, nil), true},
		{"bot not in chat", jsonAnswer(400, CodeBotNotInChat, nil), true},
		{"message not found", jsonAnswer(400, CodeMessageGone, nil), true},
		{"http 404", jsonAnswer(404, 0, nil), true},
		{"server error", jsonAnswer(500, 2200, nil), false},
		{"html 502", html, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &sdkFake{script: []func(http.ResponseWriter){tt.answer}}
			c, _ := newSDKClient(t, f)
			_, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, "")
			var de core.DeliveryError
			var ae *APIError
			if !errors.As(err, &de) || !errors.As(err, &ae) || de.Permanent() != tt.permanent {
				t.Fatalf("err %v: want a DeliveryError with Permanent %v", err, tt.permanent)
			}
			if ae.Op != "im.message.create" || strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q: want op named and no body", err)
			}
		})
	}
}

// TestSDKLoggerNeverLogsBodiesOrTokens feeds the adapter's SDK logger the kinds of
// lines the SDK writes and checks nothing secret reaches slog.
func TestSDKLoggerNeverLogsBodiesOrTokens(t *testing.T) {
	var buf bytes.Buffer
	l := sdkLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx := context.Background()
	l.Debug(ctx, "req:", `{"app_secret":"S3CRET"}`)
	l.Warn(ctx, "translate request failed, err:", "Authorization: Bearer t-g1000abcdefghijk")
	l.Error(ctx, `response content-type not json, response: StatusCode: 502, Body: {"tenant_access_token":"t-g1000abcdefghijk"}`)
	l.Info(ctx, `token fetch {"app_secret": "S3CRET", "app_id":"cli_1"} got u-abcdefghijkl`)
	out := buf.String()
	for _, leak := range []string{"S3CRET", "t-g1000", "u-abcdefghijkl", "{\"tenant"} {
		if strings.Contains(out, leak) {
			t.Errorf("logged %q:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "cli_1") {
		t.Errorf("lines lost:\n%s", out)
	}
}

// TestSDKOversizedAnswerIsAnError: a JSON answer past maxResponseBytes fails the
// call instead of being cut and decoded.
func TestSDKOversizedAnswerIsAnError(t *testing.T) {
	big := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"code":0,"msg":"` + strings.Repeat("x", maxResponseBytes) + `","data":{"message_id":"om_2"}}`))
	}
	f := &sdkFake{script: []func(http.ResponseWriter){big}}
	c, _ := newSDKClient(t, f)
	m, err := c.createMessage(context.Background(), "chat_id", "oc_1", "text", `{"text":"hi"}`, "")
	if !errors.Is(err, errTooLarge) {
		t.Errorf("createMessage = %+v, %v; want errTooLarge", m, err)
	}
}
