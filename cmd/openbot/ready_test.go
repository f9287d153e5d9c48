package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

func healthz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHealthy waits until /healthz answers 200 and returns its body.
func waitHealthy(t *testing.T, addr string) string {
	t.Helper()
	var body string
	waitUntil(t, "/healthz 200", func() bool {
		var code int
		code, body = healthz(t, addr)
		return code == http.StatusOK
	})
	return body
}

// TestHealthzWaitsForTelegramPoller: while the account is started but its poller
// has not sent the first getUpdates (getMe is held at the fake), /healthz answers
// 503 naming the account; once the fake saw getUpdates it answers 200.
func TestHealthzWaitsForTelegramPoller(t *testing.T) {
	const token = "123456:TEST"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000001, Username: "openbot_chief_bot"})
	defer fake.Close()
	release := fake.Hold("getMe")
	defer release()
	addr, _ := serveWith(t, openaitest.New(t), `
telegram:
  - name: chief
    bot: chief_of_staff
    token: ${TELEGRAM_TOKEN}
    api_endpoint: `+fake.URL()+"\n", map[string]string{"TELEGRAM_TOKEN": token})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fake.WaitCalls(ctx, "getMe", 1); err != nil {
		t.Fatal(err)
	}
	code, body := healthz(t, addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "telegram/chief: connecting") {
		t.Errorf("before the first getUpdates: %d %q, want 503 naming telegram/chief", code, body)
	}
	release()
	if _, err := fake.WaitCalls(ctx, "getUpdates", 1); err != nil {
		t.Fatal(err)
	}
	if code, body := healthz(t, addr); code != http.StatusOK || !strings.Contains(body, "telegram/chief: started") {
		t.Errorf("after the first getUpdates: %d %q, want 200", code, body)
	}
}

// TestHealthzWaitsForSocketModeHello: while Socket Mode has not connected (the
// fake holds apps.connections.open) /healthz answers 503 naming the account; after
// the fake said hello it turns 200.
func TestHealthzWaitsForSocketModeHello(t *testing.T) {
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer fake.Close()
	release := fake.Hold("apps.connections.open")
	defer release()
	addr, _ := serveWith(t, openaitest.New(t), `
slack:
  - name: acme
    bot: "*"
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
    api_url: `+fake.APIURL()+"\n", map[string]string{"SLACK_APP_TOKEN": "xapp-test", "SLACK_BOT_TOKEN": "xoxb-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, func(s *slacktest.Server) bool {
		for _, c := range s.Calls() {
			if c.Method == "apps.connections.open" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	code, body := healthz(t, addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "slack/acme: connecting") {
		t.Errorf("before hello: %d %q, want 503 naming slack/acme", code, body)
	}
	release()
	if err := fake.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if body := waitHealthy(t, addr); !strings.Contains(body, "slack/acme: started") {
		t.Errorf("after hello: %q", body)
	}
}
