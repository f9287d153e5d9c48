package telegram

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"openbot/adapters/telegram/telegramtest"
)

const hookSecret = "TEST_webhook-secret_0001"

func webhookEnv(t *testing.T) (*env, *Adapter, *httptest.Server, []byte) {
	t.Helper()
	e := newEnv(t)
	o := e.options()
	o.Mode, o.Cursors = ModeWebhook, nil
	o.WebhookURL = "https://bridge.example.invalid/telegram/main/webhook"
	o.SecretToken = hookSecret
	a := e.adapter(t, o)
	mux := http.NewServeMux()
	a.MountHTTP(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	var fx struct {
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	}
	if err := json.Unmarshal(readFixture(t, "webhook_request.json"), &fx); err != nil {
		t.Fatal(err)
	}
	if fx.Headers[SecretHeader] != hookSecret {
		t.Fatalf("fixture secret %q", fx.Headers[SecretHeader])
	}
	return e, a, hs, fx.Body
}

func post(t *testing.T, url, secret string, body []byte) int {
	t.Helper()
	req, err := telegramtest.WebhookRequest(context.Background(), url, secret, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhook(t *testing.T) {
	e, a, hs, body := webhookEnv(t)
	url := hs.URL + WebhookPath("main")

	if got := post(t, url, hookSecret, body); got != http.StatusServiceUnavailable {
		t.Errorf("before Run: status %d, want 503", got)
	}
	run(t, a)
	calls := e.waitCalls(t, "setWebhook", 1)
	if p := calls[0].Params; p["url"] != "https://bridge.example.invalid/telegram/main/webhook" || p["secret_token"] != hookSecret || p["allowed_updates"] == "" {
		t.Errorf("setWebhook params %v", p)
	}
	started(t, e, a)

	for _, secret := range []string{"", "wrong", hookSecret + "x", hookSecret[:len(hookSecret)-1]} {
		if got := post(t, url, secret, body); got != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", secret, got)
		}
	}
	if got := e.eng.ins.All(); len(got) != 0 {
		t.Fatalf("ingested %d messages from unauthenticated requests", len(got))
	}
	if got := post(t, url, hookSecret, []byte("{not json")); got != http.StatusOK {
		t.Errorf("bad body: status %d, want 200 (logged and acknowledged)", got)
	}
	if got := post(t, url, hookSecret, body); got != http.StatusOK {
		t.Fatalf("valid update: status %d, want 200", got)
	}
	got := e.eng.ins.All()
	if len(got) != 1 || got[0].DedupKey != "telegram:-1001000000001:201" || got[0].Mentions[0] != "engineer" {
		t.Errorf("ingested %+v", got)
	}
	if n := len(e.srv.Calls("getUpdates")); n != 0 {
		t.Errorf("%d getUpdates calls in webhook mode", n)
	}
}

func TestWebhookIngestFailureIs500(t *testing.T) {
	e, a, hs, body := webhookEnv(t)
	e.eng.err = context.DeadlineExceeded
	run(t, a)
	started(t, e, a)
	if got := post(t, hs.URL+WebhookPath("main"), hookSecret, body); got != http.StatusInternalServerError {
		t.Errorf("status %d, want 500 so Telegram redelivers", got)
	}
}

func TestPollingMountsNothing(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	mux := http.NewServeMux()
	a.MountHTTP(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WebhookPath("main"), nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("status %d, want 404", rec.Code)
	}
}

func TestNewValidates(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		mod  func(*Options)
	}{
		{"no name", func(o *Options) { o.Name = "" }},
		{"no token", func(o *Options) { o.Token = "" }},
		{"no bot", func(o *Options) { o.Bot = "" }},
		{"unknown bot", func(o *Options) { o.Bot = "nobody" }},
		{"no engine", func(o *Options) { o.Engine = nil }},
		{"polling without cursors", func(o *Options) { o.Cursors = nil }},
		{"bad mode", func(o *Options) { o.Mode = "push" }},
		{"webhook without url", func(o *Options) { o.Mode, o.SecretToken = ModeWebhook, "abc" }},
		{"webhook bad secret", func(o *Options) {
			o.Mode, o.WebhookURL, o.SecretToken = ModeWebhook, "https://x/telegram/main/webhook", "no spaces"
		}},
		{"bad dm policy", func(o *Options) { o.DMPolicy = "sometimes" }},
	}
	for _, tt := range tests {
		o := e.options()
		tt.mod(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted %+v", tt.name, o)
		}
	}
	if _, err := New(e.options()); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestRunFailsOnBadToken(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	o.Token = "123:wrong"
	a := e.adapter(t, o)
	err := a.Run(context.Background())
	if err == nil {
		t.Fatal("Run with a rejected token returned nil")
	}
	if strings.Contains(err.Error(), o.Token) {
		t.Errorf("error leaks the token: %v", err)
	}
}
