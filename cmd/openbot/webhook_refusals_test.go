package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/hooks"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

// TestWebhookRefusalsLogOneWarnEach sends bad requests to each platform's
// webhook on the real listener (Slack in HTTP mode, Telegram and Feishu in
// webhook mode, and account paths no account serves) and checks that every one
// is refused or dropped with exactly one WARN line and nothing stored.
func TestWebhookRefusalsLogOneWarnEach(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("should not run") })
	const (
		slackSecret = "slack-signing-secret-0123"
		tgToken     = "123456:TEST"
		tgSecret    = "tg_webhook_secret_0123"
		hookSecret  = "hook-secret-0123456789"
	)
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer sl.Close()
	tg := telegramtest.NewServer(telegramtest.Bot{Token: tgToken, ID: 900000001, Username: "openbot_chief_bot"})
	defer tg.Close()
	fs := feishutest.New(t)
	defer fs.Close()

	dir := t.TempDir()
	path := exampleConfig(t, dir, `
slack:
  - name: sl
    bot: chief_of_staff
    mode: http
    bot_token: xoxb-test
    app_token: xapp-test
    signing_secret: `+slackSecret+`
    api_url: `+sl.APIURL()+`
telegram:
  - name: tg
    bot: chief_of_staff
    mode: webhook
    webhook_url: https://openbot.example/telegram/tg/webhook
    secret_token: `+tgSecret+`
    token: `+tgToken+`
    api_endpoint: `+tg.URL()+`
feishu:
  - name: fs
    bot: chief_of_staff
    mode: webhook
    app_id: `+feishutest.AppID+`
    app_secret: `+feishutest.AppSecret+`
    verification_token: `+feishutest.VerificationToken+`
    encrypt_key: `+feishutest.EncryptKey+`
    base_url: `+fs.URL()+`
triggers:
  - name: gh
    kind: github
    secret: `+hookSecret+`
    bot: chief_of_staff
    post_to: {account: slack/sl, conversation: C1, team: T1}
  - name: signed
    kind: hmac
    secret: `+hookSecret+`
    bot: chief_of_staff
    post_to: {account: slack/sl, conversation: C1, team: T1}
    max_body_bytes: 4096
`+"\n")
	cfg := testConfig(t, path, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	addr, logs, _ := serveInProcess(t, cfg, "serve")
	base := "http://" + addr
	waitUntil(t, "every account to run", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	waitUntil(t, "the Telegram webhook to be set", func() bool { u, _ := tg.Webhook(tgToken); return u != "" })

	post := func(path, body string, hdr ...string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req
	}
	get := func(path string) *http.Request { req, _ := http.NewRequest(http.MethodGet, base+path, nil); return req }
	slackSigned := func(path, body string, at time.Time) *http.Request {
		req := post(path, body)
		slacktest.Sign(req.Header, []byte(body), slackSecret, at)
		return req
	}
	tgPost := func(body string) *http.Request {
		return post("/telegram/tg/webhook", body, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
	}
	feishuSigned := func(path string, payload []byte) *http.Request {
		req, err := feishutest.WebhookRequest(base+path, payload, feishutest.EncryptKey)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	hmacSigned := func(body string, at time.Time) *http.Request {
		ts := strconv.FormatInt(at.Unix(), 10)
		return post("/hooks/signed", body, "X-Signature-Timestamp", ts, "X-Signature", "sha256="+hooks.Sign(hookSecret, []byte(ts+"."+body)))
	}
	v2 := func(eventType string) []byte {
		b, _ := json.Marshal(map[string]any{"schema": "2.0",
			"header": map[string]any{"event_id": "ev-" + eventType, "event_type": eventType, "token": feishutest.VerificationToken},
			"event":  map[string]any{}})
		return b
	}
	now := time.Now()
	cases := []struct {
		name string
		req  func() *http.Request
	}{
		{"slack: unsigned", func() *http.Request { return post("/slack/sl/events", `{"type":"event_callback"}`) }},
		{"slack: bad signature", func() *http.Request {
			return post("/slack/sl/events", `{}`, "X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix(), 10), "X-Slack-Signature", "v0=00")
		}},
		{"slack: stale", func() *http.Request { return slackSigned("/slack/sl/events", `{}`, now.Add(-time.Hour)) }},
		{"slack: not JSON", func() *http.Request { return slackSigned("/slack/sl/events", `{nope`, now) }},
		{"slack: unknown envelope", func() *http.Request { return slackSigned("/slack/sl/events", `{"type":"nonsense"}`, now) }},
		{"slack: challenge without a challenge", func() *http.Request {
			return slackSigned("/slack/sl/events", `{"type":"url_verification"}`, now)
		}},
		{"slack: message without ts", func() *http.Request {
			return slackSigned("/slack/sl/events", `{"type":"event_callback","team_id":"T1","event":{"type":"message","channel":"C1","user":"U1","text":"hi"}}`, now)
		}},
		{"slack: interactive without payload", func() *http.Request { return slackSigned("/slack/sl/interactive", "x=1", now) }},
		{"slack: command without fields", func() *http.Request { return slackSigned("/slack/sl/commands", "text=hi", now) }},
		{"slack: wrong method", func() *http.Request { return get("/slack/sl/events") }},
		{"slack: unknown account", func() *http.Request { return post("/slack/nobody/events", `{}`) }},

		{"telegram: no secret", func() *http.Request { return post("/telegram/tg/webhook", `{"update_id":1}`) }},
		{"telegram: wrong secret", func() *http.Request {
			return post("/telegram/tg/webhook", `{"update_id":1}`, "X-Telegram-Bot-Api-Secret-Token", "wrong")
		}},
		{"telegram: not JSON", func() *http.Request { return tgPost(`{nope`) }},
		{"telegram: null", func() *http.Request { return tgPost(`null`) }},
		{"telegram: empty object", func() *http.Request { return tgPost(`{}`) }},
		{"telegram: update without a message", func() *http.Request { return tgPost(`{"update_id":5}`) }},
		{"telegram: message without a chat", func() *http.Request {
			return tgPost(`{"update_id":6,"message":{"message_id":1,"text":"hi","from":{"id":7,"first_name":"x"}}}`)
		}},
		{"telegram: click with foreign data", func() *http.Request {
			return tgPost(`{"update_id":7,"callback_query":{"id":"1","from":{"id":7,"first_name":"x"},"data":"zzz"}}`)
		}},
		{"telegram: too large", func() *http.Request { return tgPost(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`) }},
		{"telegram: wrong method", func() *http.Request { return get("/telegram/tg/webhook") }},
		{"telegram: unknown account", func() *http.Request {
			return post("/telegram/nobody/webhook", `{"update_id":1}`, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
		}},

		{"feishu: unsigned, not a challenge", func() *http.Request { return post("/feishu/fs/events", `{"encrypt":"AAAA"}`) }},
		{"feishu: plaintext signed event", func() *http.Request {
			body := feishutest.MessageEvent{MessageID: "om_plain", Text: "hi"}.JSON()
			ts := strconv.FormatInt(now.Unix(), 10)
			return post("/feishu/fs/events", string(body), "X-Lark-Request-Timestamp", ts, "X-Lark-Request-Nonce", "n",
				"X-Lark-Signature", feishu.Signature(ts, "n", feishutest.EncryptKey, body))
		}},
		{"feishu: bad signature", func() *http.Request {
			req := feishuSigned("/feishu/fs/events", v2("im.message.receive_v1"))
			req.Header.Set("X-Lark-Signature", strings.Repeat("ab", 32))
			return req
		}},
		{"feishu: not JSON inside", func() *http.Request { return feishuSigned("/feishu/fs/events", []byte("nope")) }},
		{"feishu: malformed message", func() *http.Request { return feishuSigned("/feishu/fs/events", v2("im.message.receive_v1")) }},
		{"feishu: event type not handled", func() *http.Request { return feishuSigned("/feishu/fs/events", v2("im.chat.updated_v1")) }},
		{"feishu: card of an unknown shape", func() *http.Request { return feishuSigned("/feishu/fs/card", v2("something.else")) }},
		{"feishu: wrong method", func() *http.Request { return get("/feishu/fs/events") }},
		{"feishu: unknown account", func() *http.Request { return post("/feishu/nobody/events", `{}`) }},

		{"hooks: unknown trigger", func() *http.Request { return post("/hooks/nobody", `{}`) }},
		{"hooks: unsigned", func() *http.Request {
			return post("/hooks/gh", `{"action":"opened"}`, "X-GitHub-Event", "pull_request")
		}},
		{"hooks: bad signature", func() *http.Request {
			return post("/hooks/gh", `{"action":"opened"}`, "X-GitHub-Event", "pull_request", "X-Hub-Signature-256", "sha256="+hooks.Sign("wrong", []byte(`{"action":"opened"}`)))
		}},
		{"hooks: expired timestamp", func() *http.Request { return hmacSigned(`{"event":"x"}`, now.Add(-time.Hour)) }},
		{"hooks: too large", func() *http.Request { return hmacSigned(`{"pad":"`+strings.Repeat("x", 5000)+`"}`, now) }},
		{"hooks: not JSON", func() *http.Request { return hmacSigned(`{nope`, now) }},
		{"hooks: wrong method", func() *http.Request { return get("/hooks/gh") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := warnLines(logs.String())
			resp, err := http.DefaultClient.Do(tc.req())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("status %d: the platform would redeliver a request that cannot succeed", resp.StatusCode)
			}
			after := warnLines(logs.String())
			if got := after[len(before):]; len(got) != 1 {
				t.Errorf("%d WARN lines, want 1 (status %d):\n%s", len(got), resp.StatusCode, strings.Join(got, "\n"))
			}
		})
	}
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("the model was called %d times, want none", n)
	}
	if strings.Contains(logs.String(), hookSecret) {
		t.Error("a trigger secret is in the log")
	}
	if bytes.Contains([]byte(logs.String()), []byte(slackSecret)) || strings.Contains(logs.String(), feishutest.EncryptKey) {
		t.Error("a secret is in the log")
	}
}

// warnLines returns the WARN lines of a text log.
func warnLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}
