package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram"
	"openbot/agents/openaitest"
	"openbot/config"
)

// Every platform adapter tells the channels answer when its platform last
// spoke to it, last accepted a post and rate-limited it.
var (
	_ interface {
		pulseTeller
		lastPoster
		rateLimiter
	} = (*slack.Adapter)(nil)
	_ interface {
		pulseTeller
		lastPoster
		rateLimiter
	} = (*feishu.Adapter)(nil)
	_ interface {
		pulseTeller
		lastPoster
		rateLimiter
	} = (*telegram.Adapter)(nil)
)

// TestChannelsShowSlackAndFeishuInAndOut: a real serve with a Socket Mode
// Slack account and a long-connection Feishu account; each platform answers
// the first post of the reply with its rate limit (Slack: 429 with
// Retry-After: 1; Feishu: 429, code 99991400, x-ogw-ratelimit-reset: 0). Once
// each has taken a mention and posted the answer, GET /api/v1/channels shows
// both accounts' last in and last out, the one rate limit with its wait, the
// watchdog's limit, and this process holding their ingress.
func TestChannelsShowSlackAndFeishuInAndOut(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("On it.") })
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer sl.Close()
	fs := feishutest.New(t)
	defer fs.Close()
	_, addr, logs, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}, func(c *config.Config) {
		c.Slack = []config.Slack{{Name: "acme", Bot: "*", Mode: "socket", AppToken: "xapp-test", BotToken: "xoxb-test", APIURL: sl.APIURL(), Watchdog: time.Minute}}
		c.Feishu = []config.Feishu{{Name: "acme", Bot: "chief_of_staff", Mode: "websocket", AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
			VerificationToken: feishutest.VerificationToken, EncryptKey: feishutest.EncryptKey, BaseURL: fs.URL(), Watchdog: 2 * time.Minute}}
	})
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sl.WaitConnected(ctx); err != nil {
		t.Fatalf("socket mode never connected: %v\n%s", err, logs.String())
	}
	if err := fs.WaitConnections(ctx, 1); err != nil {
		t.Fatalf("no long connection: %v\n%s", err, logs.String())
	}
	sl.FailNext("chat.postMessage", http.StatusTooManyRequests, "", time.Second)
	fs.RateLimitNext("/open-apis/im/v1/messages", 0)
	frame, err := os.ReadFile("../../adapters/slack/testdata/fixtures/socket_mode_events_api_app_mention.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.Push(ctx, frame); err != nil {
		t.Fatal(err)
	}
	ev := feishutest.MessageEvent{MessageID: "om_test_mention_1", Text: "@_user_1 how many checklist items are left?",
		Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}.JSON()
	if _, err := fs.PushEvent(ctx, ev, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.WaitCalls(ctx, "chat.postMessage", 1); err != nil {
		t.Fatalf("no Slack reply: %v\n%s", err, logs.String())
	}
	if _, err := fs.WaitMessages(ctx, 1); err != nil {
		t.Fatalf("no Feishu reply: %v\n%s", err, logs.String())
	}

	var got map[string]channelState
	waitUntil(t, "last in and out of both accounts in GET /api/v1/channels", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/channels", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var chans struct {
			Items []channelState `json:"items"`
		}
		if err := json.Unmarshal(b, &chans); err != nil {
			t.Fatalf("channels answer %d %s: %v", resp.StatusCode, b, err)
		}
		got = map[string]channelState{}
		for _, c := range chans.Items {
			got[c.Account] = c
		}
		for _, acc := range []string{"slack/acme", "feishu/acme"} {
			if c := got[acc]; c.LastIn == nil || c.LastOut == nil || c.RateLimited == 0 {
				return false
			}
		}
		return true
	})
	if c := got["slack/acme"]; c.RateLimited != 1 || c.RateLimitWaitMS != 1000 {
		t.Errorf("slack/acme rate limited %d times for %d ms, want once for 1000 ms", c.RateLimited, c.RateLimitWaitMS)
	}
	if c := got["feishu/acme"]; c.RateLimited != 1 || c.RateLimitWaitMS != 0 {
		t.Errorf("feishu/acme rate limited %d times for %d ms, want once for 0 ms", c.RateLimited, c.RateLimitWaitMS)
	}
	for _, acc := range []string{"slack/acme", "feishu/acme"} {
		c := got[acc]
		if d := time.Since(*c.LastIn); d < 0 || d > 30*time.Second {
			t.Errorf("%s last in %s ago", acc, d)
		}
		// One process on bbolt: it holds every long-lived ingress, with no lease.
		if g := c.Ingress; g == nil || !g.ThisProcess || g.Process == "" || g.Since == nil || time.Since(*g.Since) < 0 || g.Until != nil {
			t.Errorf("%s ingress %+v, want this process since it started, no lease", acc, g)
		}
	}
	if s, f := got["slack/acme"].WatchdogMS, got["feishu/acme"].WatchdogMS; s != 60000 || f != 120000 {
		t.Errorf("watchdog limits: slack %d ms, feishu %d ms, want 60000 and 120000", s, f)
	}
}
