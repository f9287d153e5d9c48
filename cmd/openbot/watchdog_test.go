package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/core"
	"openbot/internal/browsertest"
)

// get returns the body of GET url.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// serveWatched runs serve (serveOnFreePort, with the admin token) with edit,
// the log shown when the test fails; it returns the base URL, the log and stop.
func serveWatched(t *testing.T, edit func(*config.Config)) (base string, logs *lockedBuffer, stop func()) {
	t.Helper()
	llm := openaitest.New(t)
	_, addr, logs, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}, edit)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return "http://" + addr, logs, stop
}

// waitStarted waits until /healthz at base says each account started.
func waitStarted(t *testing.T, base string, accounts ...string) {
	t.Helper()
	for _, acc := range accounts {
		waitUntil(t, acc+" started", func() bool { return strings.Contains(getBody(t, base+"/healthz"), acc+": started") })
	}
}

// chiefBesideSlack configures c with the Telegram account chief (token, on tg,
// polling with a 2 s watchdog) beside the Slack account acme on sl, owner as
// the one owner and no alerts conversation: an outage of chief can only be
// told to the owner in a DM.
func chiefBesideSlack(c *config.Config, tg *telegramtest.Server, sl *slacktest.Server, token, owner string) {
	c.Owners = []string{owner}
	c.Alerts = config.Alerts{}
	c.Telegram = []config.Telegram{{Name: "chief", Bot: "chief_of_staff", Token: token, APIEndpoint: tg.Endpoint(), Mode: "polling",
		DMPolicy: "allowlist", PollTimeout: time.Second, Watchdog: 2 * time.Second}}
	c.Slack = []config.Slack{{Name: "acme", Bot: "*", Mode: "socket", AppToken: "xapp-test", BotToken: "xoxb-test", APIURL: sl.APIURL(),
		Watchdog: time.Hour}}
}

// TestWatchdogReconnectsSilentTelegram: a real serve with a polling Telegram
// account whose fake Bot API stops answering getUpdates (the calls hang). Within
// two poll timeouts /healthz shows the account "reconnecting", the reconnect
// metric and the down gauge fire, and a new getUpdates is sent; still silent,
// the owners are told in the alerts conversation on another account. When the
// API answers again, the account is back, and the owners are told that too.
func TestWatchdogReconnectsSilentTelegram(t *testing.T) {
	const chief, ops = "111:CHIEF", "222:OPS"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: chief, ID: 900000001, Username: "chief_bot"},
		telegramtest.Bot{Token: ops, ID: 900000002, Username: "ops_bot"})
	defer fake.Close()
	const poll = 4 * time.Second
	base, logs, stop := serveWatched(t, func(c *config.Config) {
		c.Metrics.Enabled = true
		c.Telegram = []config.Telegram{
			{Name: "chief", Bot: "chief_of_staff", Token: chief, APIEndpoint: fake.Endpoint(), Mode: "polling", DMPolicy: "allowlist",
				PollTimeout: poll, Watchdog: 5 * time.Second},
			{Name: "ops", Bot: "chief_of_staff", Token: ops, APIEndpoint: fake.Endpoint(), Mode: "polling", DMPolicy: "allowlist",
				PollTimeout: poll, Watchdog: time.Hour},
		}
		c.Alerts = config.Alerts{Account: "telegram/ops", Conversation: "555"}
	})
	defer stop()
	waitStarted(t, base, "telegram/chief")
	before := len(fake.Calls("getUpdates"))

	release := fake.Hold("getUpdates")
	defer release()
	held := time.Now()
	waitUntil(t, "reconnecting on /healthz", func() bool {
		return strings.Contains(getBody(t, base+"/healthz"), "telegram/chief: reconnecting: no answer from the platform")
	})
	if took := time.Since(held); took > 2*poll {
		t.Errorf("reconnecting shown %s after polling stalled, want within two poll timeouts (%s)", took, 2*poll)
	}
	m := getBody(t, base+"/metrics")
	for _, want := range []string{`openbot_channel_watchdog_reconnects_total{account="telegram/chief"} 1`, `openbot_channel_down{account="telegram/chief"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, `openbot_channel_down{account="telegram/ops"} 1`) {
		t.Error("the ops account, within its limit, is reported down")
	}
	waitUntil(t, "a new getUpdates after the reconnect", func() bool { return len(fake.Calls("getUpdates")) > before+1 })

	told := func(want string) func() bool {
		return func() bool {
			for _, msg := range fake.Messages(ops) {
				if msg.Chat == 555 && strings.Contains(msg.Text, want) {
					return true
				}
			}
			return false
		}
	}
	waitUntil(t, "the owners told in the alerts conversation", told("telegram/chief has heard nothing from its platform"))
	if !strings.Contains(logs.String(), "reconnecting") {
		t.Error("the log does not say the account was reconnected")
	}

	// The dashboard's Team page shows it, from GET /api/v1/channels.
	ctx := browsertest.Browser(t)
	browsertest.SignIn(t, ctx, base, testAdminToken)
	browsertest.Run(t, ctx, "the channels on the team page",
		browsertest.Click(`nav a[data-nav="team"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-account="telegram/chief"]`)))
	browsertest.WaitText(t, ctx, `tr[data-account="telegram/chief"] td[data-label="State"]`, "reconnecting")
	browsertest.WaitText(t, ctx, `tr[data-account="telegram/ops"] td[data-label="State"]`, "connected")
	var chans struct {
		Items []channelState `json:"items"`
	}
	raw := browsertest.Value(t, ctx, "the channels API", chromedp.Evaluate[string](`fetch("/api/v1/channels").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(raw), &chans); err != nil {
		t.Fatal(err)
	}
	for _, c := range chans.Items {
		if c.Account == "telegram/chief" && (c.State != "reconnecting" || c.LastIn == nil || time.Since(*c.LastIn) < 5*time.Second || c.WatchdogMS != 5000) {
			t.Errorf("channels API: %+v, want reconnecting, silent past its 5s watchdog", c)
		}
	}
	browsertest.Screenshots(t, ctx, "team-channels")

	release()
	waitUntil(t, "the account back", func() bool { return strings.Contains(getBody(t, base+"/healthz"), "telegram/chief: started") })
	waitUntil(t, "the owners told it is back", told("telegram/chief is back"))
	if m := getBody(t, base+"/metrics"); !strings.Contains(m, `openbot_channel_down{account="telegram/chief"} 0`) {
		t.Error("openbot_channel_down stays 1 after the account is back")
	}
}

// fakePulser is a pulser whose platform last answered at pulse (zero: never),
// counting Reconnect calls.
type fakePulser struct {
	pulse      time.Time
	reconnects int
}

func (p *fakePulser) Pulse() time.Time { return p.pulse }
func (p *fakePulser) Reconnect()       { p.reconnects++ }

// TestWatchdogOnlyWatchesIngressRunningHere: an account whose ingress another
// process holds (standby) has never heard its platform here; the watchdog
// leaves it alone however long that lasts, and tells no one. Once this process
// takes the ingress, silence counts from then, not from the zero pulse: no
// reconnect within the limit, one after it while still silent, none once the
// platform answered.
func TestWatchdogOnlyWatchesIngressRunningHere(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := newHealth(nil)
	var alerts []string
	h.dog = dogOptions{log: testLogger(&lockedBuffer{}), now: func() time.Time { return now },
		alert: func(_ context.Context, text string, _ []core.AccountID) error {
			alerts = append(alerts, text)
			return nil
		}}
	p := &fakePulser{}
	const limit = time.Minute
	h.pulse("telegram/chief", p, limit)
	h.set("telegram/chief", leasingState)
	h.set("telegram/chief", standbyState("proc-a#1"))
	for range 5 {
		now = now.Add(limit)
		h.checkPulses(t.Context())
	}
	if p.reconnects != 0 || len(alerts) != 0 {
		t.Errorf("standby: %d reconnects, alerts %q; want none", p.reconnects, alerts)
	}
	h.set("telegram/chief", "started") // the ingress taken over
	now = now.Add(limit / 2)
	h.checkPulses(t.Context())
	if p.reconnects != 0 {
		t.Errorf("taken over %s ago, no answer yet: %d reconnects, want none within the %s limit", limit/2, p.reconnects, limit)
	}
	now = now.Add(limit)
	h.checkPulses(t.Context())
	if p.reconnects != 1 {
		t.Errorf("taken over %s ago, silent since: %d reconnects, want 1", 3*limit/2, p.reconnects)
	}
	p.pulse = now
	now = now.Add(time.Second)
	h.checkPulses(t.Context())
	h.mu.Lock()
	state := h.stateLocked("telegram/chief")
	h.mu.Unlock()
	if p.reconnects != 1 || state != "started" {
		t.Errorf("answered: %d reconnects, state %q; want 1 and started", p.reconnects, state)
	}
}

// TestWatchdogReconnectsSilentSlackAndFeishu: a real serve with a Socket Mode
// Slack account and a long-connection Feishu account whose fakes let the open
// websocket go quiet without closing it, as a connection whose network path
// died does (no more pings from Slack, no more pongs from Feishu). Past each
// account's watchdog limit, well before slack-go's own 30 s ping deadline and
// the Feishu adapter's three ping periods, /healthz shows it "reconnecting",
// the reconnect metric fires and the watchdog restarts the ingress: a new
// websocket is dialled, its frames bring the account back, and the log and
// the down gauge say so.
func TestWatchdogReconnectsSilentSlackAndFeishu(t *testing.T) {
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test", PingInterval: 200 * time.Millisecond})
	defer sl.Close()
	fs := feishutest.New(t)
	defer fs.Close()
	fs.SetClientConfig(feishu.ClientConfig{ReconnectCount: -1, PingInterval: 1})
	base, logs, stop := serveWatched(t, func(c *config.Config) {
		c.Metrics.Enabled = true
		c.Slack = []config.Slack{{Name: "acme", Bot: "*", Mode: "socket", AppToken: "xapp-test", BotToken: "xoxb-test", APIURL: sl.APIURL(),
			Watchdog: 2 * time.Second}} // a reconnect waits 1 s (the adapter's backoff) before it dials
		c.Feishu = []config.Feishu{{Name: "acme", Bot: "chief_of_staff", Mode: "websocket", AppID: feishutest.AppID, AppSecret: feishutest.AppSecret,
			VerificationToken: feishutest.VerificationToken, BaseURL: fs.URL(), Watchdog: 2 * time.Second}}
	})
	defer stop()
	waitStarted(t, base, "slack/acme", "feishu/acme")

	sl.Silence()
	fs.Silence()
	for _, acc := range []string{"slack/acme", "feishu/acme"} {
		waitUntil(t, acc+" reconnecting on /healthz", func() bool {
			return strings.Contains(getBody(t, base+"/healthz"), acc+": reconnecting: no answer from the platform")
		})
	}
	waitUntil(t, "a new Socket Mode connection", func() bool { open, total := sl.Connections(); return open == 1 && total == 2 })
	waitUntil(t, "a new long connection", func() bool { return fs.Connections() == 2 })
	for _, acc := range []string{"slack/acme", "feishu/acme"} {
		waitUntil(t, acc+" back", func() bool {
			return strings.Contains(getBody(t, base+"/metrics"), `openbot_channel_down{account="`+acc+`"} 0`)
		})
		if m := getBody(t, base+"/metrics"); !strings.Contains(m, `openbot_channel_watchdog_reconnects_total{account="`+acc+`"} 1`) {
			t.Errorf("/metrics lacks one watchdog reconnect of %s:\n%s\n%s", acc, m, logs.String())
		}
	}
	for _, want := range []string{`account silent for longer than its watchdog limit: reconnecting" account=slack/acme`,
		`account silent for longer than its watchdog limit: reconnecting" account=feishu/acme`,
		`"account is back: its platform answers again" account=slack/acme`, `"account is back: its platform answers again" account=feishu/acme`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if strings.Contains(logs.String(), "ping timeout") || strings.Contains(logs.String(), "no pong for 3 ping intervals") {
		t.Error("the adapters' own dead-connection checks fired: the watchdog was not first")
	}
}

// TestWatchdogTellsOwnersInDMs: with no alerts conversation configured, a
// Telegram account that stays silent is told to the owner in their Slack DM,
// opened with conversations.open on the Slack account (the silent account is
// not used), once when it stays down and once when it is back.
func TestWatchdogTellsOwnersInDMs(t *testing.T) {
	const chief = "111:CHIEF"
	tg := telegramtest.NewServer(telegramtest.Bot{Token: chief, ID: 900000001, Username: "chief_bot"})
	defer tg.Close()
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer sl.Close()
	sl.AddUser(slacktest.User{ID: "U0BOSS", Name: "boss"})
	base, logs, stop := serveWatched(t, func(c *config.Config) {
		chiefBesideSlack(c, tg, sl, chief, "slack:T0TEST:U0BOSS")
	})
	defer stop()
	waitStarted(t, base, "telegram/chief", "slack/acme")
	dms := func(want string) int {
		n := 0
		for _, m := range sl.Messages() {
			if m.Channel == "D0BOSS" && strings.Contains(m.Text, want) {
				n++
			}
		}
		return n
	}
	release := tg.Hold("getUpdates")
	defer release()
	waitUntil(t, "the owner told in their Slack DM", func() bool { return dms("telegram/chief has heard nothing from its platform") == 1 })
	if calls := sl.CallsTo("conversations.open"); len(calls) != 1 || calls[0].Form.Get("users") != "U0BOSS" {
		t.Errorf("conversations.open calls %+v, want one for U0BOSS", calls)
	}
	release()
	waitUntil(t, "the owner told it is back", func() bool { return dms("telegram/chief is back") == 1 })
	if n := dms("heard nothing"); n != 1 {
		t.Errorf("told %d times it stays down, want once", n)
	}
	if strings.Contains(logs.String(), "alert not delivered") {
		t.Error("an alert was logged as not delivered")
	}
}

// TestWatchdogWarnsWhenNoOwnerReachable: with no alerts conversation and the
// only owner on the silent account's platform, no other account reaches them:
// one WARN says so for the outage, and nothing is posted anywhere.
func TestWatchdogWarnsWhenNoOwnerReachable(t *testing.T) {
	const chief = "111:CHIEF"
	tg := telegramtest.NewServer(telegramtest.Bot{Token: chief, ID: 900000001, Username: "chief_bot"})
	defer tg.Close()
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer sl.Close()
	base, logs, stop := serveWatched(t, func(c *config.Config) {
		chiefBesideSlack(c, tg, sl, chief, "telegram:4242")
	})
	defer stop()
	waitStarted(t, base, "telegram/chief")
	release := tg.Hold("getUpdates")
	defer release()
	const warn = "no owner could be told in a DM on another account"
	waitUntil(t, "the WARN", func() bool { return strings.Contains(logs.String(), warn) })
	release()
	waitUntil(t, "the account back", func() bool {
		return strings.Contains(logs.String(), `"account is back: its platform answers again" account=telegram/chief`)
	})
	if n := strings.Count(logs.String(), warn); n != 1 {
		t.Errorf("%d WARNs that no owner was told, want one for the outage:\n%s", n, logs.String())
	}
	if msgs := tg.Messages(chief); len(msgs) != 0 {
		t.Errorf("posted on the silent account: %+v", msgs)
	}
	if calls := sl.CallsTo("conversations.open"); len(calls) != 0 {
		t.Errorf("conversations.open calls %+v, want none", calls)
	}
}
