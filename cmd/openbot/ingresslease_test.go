package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/internal/browsertest"
	"openbot/store/postgres/pgtest"
)

// serveSharedPG starts serve in this test process on the example config with
// driver postgres at dsn, store.process_id proc, a 3s lease and one Telegram
// polling account at the fake; it returns the listener address and a stop
// function (also run at the end of the test).
func serveSharedPG(t *testing.T, dsn, proc string, tg *telegramtest.Server, token string) (addr string, stop func()) {
	t.Helper()
	llm := openaitest.New(t)
	dir := t.TempDir()
	path := exampleConfig(t, dir)
	data, _ := os.ReadFile(path)
	text := string(data)
	for old, repl := range map[string]string{
		"driver: bolt":    "driver: postgres",
		`process_id: ""`:  "process_id: " + proc,
		"lease_ttl: 15s ": "lease_ttl: 3s  ",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("config.example.yaml no longer contains %q", old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	text += "telegram:\n  - name: chief\n    bot: chief_of_staff\n    token: ${TELEGRAM_TOKEN}\n    api_endpoint: " + tg.URL() + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TELEGRAM_TOKEN": token, "DATABASE_URL": dsn, "OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}
	cfg := testConfig(t, path, env)
	addr, _, stop = serveInProcess(t, cfg, "serve "+proc)
	return addr, stop
}

// waitHealthState waits until /healthz answers 200 with want in its body and
// returns the body.
func waitHealthState(t *testing.T, addr, want string) string {
	t.Helper()
	var body string
	waitUntil(t, "/healthz 200 with "+want, func() bool {
		var code int
		code, body = healthz(t, addr)
		return code == http.StatusOK && strings.Contains(body, want)
	})
	return body
}

// TestServeSharedPostgresIngressLease: two serve processes on one PostgreSQL
// database both start (serve is no longer exclusive); the first runs the
// Telegram poller and reads "started", the second stands by, naming the
// holder, and still counts as ready (200). When the holder stops, the second
// takes the ingress over and polls.
func TestServeSharedPostgresIngressLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	const token = "123456:LEASE"
	tg := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000002, Username: "openbot_lease_bot"})
	defer tg.Close()

	addrA, stopA := serveSharedPG(t, dsn, "proc-a", tg, token)
	waitHealthState(t, addrA, "telegram/chief: started")
	addrB, _ := serveSharedPG(t, dsn, "proc-b", tg, token)
	body := waitHealthState(t, addrB, "telegram/chief: standby (ingress held by proc-a)")
	if !strings.HasPrefix(body, "ok") {
		t.Errorf("standby process /healthz = %q, want ok", body)
	}
	if _, body := healthz(t, addrA); !strings.Contains(body, "telegram/chief: started") {
		t.Errorf("holder /healthz = %q, want the account started", body)
	}

	stopA()
	polls := len(tg.Calls("getUpdates"))
	waitHealthState(t, addrB, "telegram/chief: started")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tg.WaitCalls(ctx, "getUpdates", polls+1); err != nil {
		t.Fatalf("no getUpdates after the takeover: %v", err)
	}
}

// getChannels returns GET /api/v1/channels of the serve at addr by account.
func getChannels(t *testing.T, addr string) map[string]channelState {
	t.Helper()
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
	out := map[string]channelState{}
	for _, c := range chans.Items {
		out[c.Account] = c
	}
	return out
}

// TestChannelsShowIngressHolder: two serve processes on one PostgreSQL
// database; the channels answer of each names proc-a as the holder of the
// Telegram poller, since when and until when its lease lasts, marked "this
// process" on proc-a only, and so does the dashboard's Team page. When proc-a
// stops, proc-b's answer and page show proc-b holding it.
func TestChannelsShowIngressHolder(t *testing.T) {
	dsn := pgtest.DSN(t)
	const token = "123456:HOLDER"
	tg := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000003, Username: "openbot_holder_bot"})
	defer tg.Close()
	addrA, stopA := serveSharedPG(t, dsn, "proc-a", tg, token)
	waitHealthState(t, addrA, "telegram/chief: started")
	addrB, _ := serveSharedPG(t, dsn, "proc-b", tg, token)
	waitHealthState(t, addrB, "telegram/chief: standby (ingress held by proc-a)")

	for addr, this := range map[string]bool{addrA: true, addrB: false} {
		g := getChannels(t, addr)["telegram/chief"].Ingress
		if g == nil || g.Process != "proc-a" || g.ThisProcess != this || g.Since == nil || g.Until == nil {
			t.Fatalf("channels of %s: ingress %+v, want proc-a, this process %v, since and until", addr, g, this)
		}
		if now := time.Now(); g.Since.After(now) || !g.Until.After(*g.Since) || g.Until.Sub(now) > 3*time.Second {
			t.Errorf("ingress since %s until %s, want taken before now and expiring within the 3s lease", g.Since, g.Until)
		}
	}

	ctx := browsertest.Browser(t)
	cell := `tr[data-account="telegram/chief"] td[data-label="Ingress"]`
	browsertest.SignIn(t, ctx, "http://"+addrB, testAdminToken)
	browsertest.Run(t, ctx, "the channels on proc-b's team page",
		browsertest.Click(`nav a[data-nav="team"]`),
		chromedp.WaitVisible(chromedp.CSS(cell)))
	browsertest.WaitText(t, ctx, cell, "proc-a")
	browsertest.WaitText(t, ctx, cell, "lease expires in")
	if text := browsertest.Value(t, ctx, "the ingress cell", browsertest.Text(cell)); strings.Contains(text, "this process") {
		t.Errorf("proc-b's page marks proc-a's ingress as its own: %q", text)
	}
	browsertest.Screenshots(t, ctx, "channels-ingress-standby")

	stopA()
	waitHealthState(t, addrB, "telegram/chief: started")
	if g := getChannels(t, addrB)["telegram/chief"].Ingress; g == nil || g.Process != "proc-b" || !g.ThisProcess {
		t.Errorf("after the takeover, proc-b's channels: ingress %+v, want proc-b, this process", g)
	}
	browsertest.WaitText(t, ctx, cell, "proc-b") // the table redraws itself every 5 s
	browsertest.WaitText(t, ctx, cell, "this process")
	browsertest.Screenshots(t, ctx, "channels-ingress-holder")
}

// TestHealthStandbyIsReady: an account whose ingress another process holds
// (its own ingress never went live here) reads "standby (ingress held by
// <process>)" and counts as ready; while the lease is being taken it is not.
func TestHealthStandbyIsReady(t *testing.T) {
	engineReady := make(chan struct{})
	close(engineReady)
	h := newHealth(engineReady)
	h.watch("telegram/chief", fakeIngress{live: make(chan struct{}), down: func() string { return "" }})
	h.set("telegram/chief", leasingState)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("taking the lease: %d %q, want 503", rec.Code, rec.Body.String())
	}
	h.set("telegram/chief", standbyState("proc-b"))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\ntelegram/chief: standby (ingress held by proc-b)\n" {
		t.Errorf("standby: %d %q, want 200 naming the holder", rec.Code, rec.Body.String())
	}
}

// TestLongLivedIngress: Socket Mode, polling and the Feishu long connection
// (also as the default mode) are leased; webhook modes are not.
func TestLongLivedIngress(t *testing.T) {
	for _, tt := range []struct {
		cfg  any
		want bool
	}{
		{config.Slack{}, true}, {config.Slack{Mode: "socket"}, true}, {config.Slack{Mode: "http"}, false},
		{config.Telegram{}, true}, {config.Telegram{Mode: "polling"}, true}, {config.Telegram{Mode: "webhook"}, false},
		{config.Feishu{}, true}, {config.Feishu{Mode: "websocket"}, true}, {config.Feishu{Mode: "webhook"}, false},
		{nil, false},
	} {
		if got := longLivedIngress(tt.cfg); got != tt.want {
			t.Errorf("longLivedIngress(%#v) = %v, want %v", tt.cfg, got, tt.want)
		}
	}
}
