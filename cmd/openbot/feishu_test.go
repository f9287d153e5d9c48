package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu/feishutest"
	"openbot/agents/openaitest"
	"openbot/core"
)

// TestServeFeishuGroupMention runs the real wiring with a Feishu app pointed at the
// fake Open API (DESIGN.md §3): a group @mention is answered in its topic
// thread, in webhook mode (encrypted, signed request on the shared listener) and in
// long-connection mode (a fragmented event over the websocket).
func TestServeFeishuGroupMention(t *testing.T) {
	for _, mode := range []string{"webhook", "websocket"} {
		t.Run(mode, func(t *testing.T) {
			llm := openaitest.New(t)
			llm.Handle(func(openaitest.Request) openaitest.Reply {
				return openaitest.Text("Release checklist: **3** items left.")
			})
			fake := feishutest.New(t)
			defer fake.Close()

			dir := t.TempDir()
			path := exampleConfig(t, dir, `
feishu:
  - name: acme
    bot: chief_of_staff
    mode: `+mode+`
    app_id: ${FEISHU_APP_ID}
    app_secret: ${FEISHU_APP_SECRET}
    verification_token: `+feishutest.VerificationToken+`
    encrypt_key: `+feishutest.EncryptKey+`
    base_url: `+fake.URL()+"\n")
			cfg := testConfig(t, path, map[string]string{
				"OPENAI_BASE_URL": llm.URL(), "FEISHU_APP_ID": feishutest.AppID, "FEISHU_APP_SECRET": feishutest.AppSecret,
			})
			engine := make(chan *core.Engine, 1)
			listen, logs, stop := serveInProcess(t, cfg, "serve", func(a *app) { a.onEngine = func(e *core.Engine) { engine <- e } })
			wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer wcancel()
			ev := feishutest.MessageEvent{MessageID: "om_test_mention_1", Text: "@_user_1 how many checklist items are left?",
				Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}.JSON()
			if mode == "webhook" {
				// 503 until the adapter knows its bot (the platform would redeliver).
				waitUntil(t, "the webhook to take the event", func() bool {
					req, err := feishutest.WebhookRequest("http://"+listen+"/feishu/acme/events", ev, feishutest.EncryptKey)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := http.DefaultClient.Do(req.WithContext(wctx))
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
						t.Fatalf("webhook answered %d:\n%s", resp.StatusCode, logs.String())
					}
					return resp.StatusCode == http.StatusOK
				})
			} else {
				if err := fake.WaitConnections(wctx, 1); err != nil {
					t.Fatalf("no long connection: %v\n%s", err, logs.String())
				}
				if _, err := fake.PushEvent(wctx, ev, 2); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fake.WaitMessages(wctx, 1); err != nil {
				t.Fatalf("no reply: %v\n%s", err, logs.String())
			}
			// Exactly one reply: wait until the engine is idle (no item, run or
			// delivery left), then stop it so anything still queued is flushed,
			// and count.
			if err := (<-engine).WaitIdle(wctx); err != nil {
				t.Fatalf("WaitIdle: %v\n%s", err, logs.String())
			}
			stop()
			// Streaming is on by default: the one message is updated into the answer.
			msgs := fake.Live()
			if len(msgs) != 1 {
				t.Fatalf("sent %d messages, want exactly one reply: %+v\n%s", len(msgs), msgs, logs.String())
			}
			if n := len(llm.Requests()); n != 1 {
				t.Errorf("the model was called %d times, want once (one run)", n)
			}
			m := msgs[0]
			if m.Kind != "reply" || m.ReplyTo != "om_test_mention_1" || !m.InThread {
				t.Errorf("reply %+v: want a reply in thread to om_test_mention_1", m)
			}
			if !strings.Contains(m.Text(), "**3** items left") {
				t.Errorf("reply text %q", m.Text())
			}
			if strings.Contains(logs.String(), feishutest.AppSecret) {
				t.Error("the app secret appears in the log")
			}
		})
	}
}
