package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

// TestServeTelegramPrivateMessage runs the real wiring with a Telegram account
// pointed at the fake Bot API (DESIGN.md §3 and §8): a fixture private message is
// answered in the chat as a reply to it, the offset is saved after the durable
// ingest, and a restart does not answer it again.
func TestServeTelegramPrivateMessage(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Text("Yesterday: **two** incidents, both resolved.")
	})
	const token = "123456:TEST"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000001, Username: "openbot_chief_bot"})
	defer fake.Close()

	dir := t.TempDir()
	path := exampleConfig(t, dir, `
telegram:
  - name: chief
    bot: chief_of_staff
    token: ${TELEGRAM_TOKEN}
    api_endpoint: `+fake.URL()+`
    allow_users: ["100000001"]
`)
	cfg := testConfig(t, path, map[string]string{"OPENAI_BASE_URL": llm.URL(), "TELEGRAM_TOKEN": token})
	update, err := os.ReadFile("../../adapters/telegram/testdata/updates/01_private_text.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.PushUpdate(token, update); err != nil {
		t.Fatal(err)
	}

	_, logs, stop := serveInProcess(t, cfg, "serve")
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := fake.WaitCalls(wctx, "sendMessage", 1); err != nil {
		t.Fatalf("no reply sent: %v\n%s", err, logs.String())
	}
	if err := fake.WaitConfirmed(wctx, token, 500000002); err != nil {
		t.Fatalf("offset not confirmed: %v\n%s", err, logs.String())
	}
	stop()
	sends := fake.Calls("sendMessage")
	if len(sends) != 1 {
		t.Fatalf("sendMessage calls = %d, want 1", len(sends))
	}
	p := sends[0].Params
	if p["chat_id"] != "100000001" || !strings.Contains(p["reply_parameters"], `"message_id":10`) {
		t.Errorf("reply went to chat %q with reply_parameters %q, want chat 100000001 replying to message 10", p["chat_id"], p["reply_parameters"])
	}
	// Streaming is on by default: the sent message is edited into the answer.
	if ms := fake.Messages(token); len(ms) != 1 || !strings.Contains(ms[0].Text, "<b>two</b>") || ms[0].ParseMode != "HTML" {
		t.Errorf("chat holds %+v, want one message with the model's answer as Telegram HTML", ms)
	}
	if strings.Contains(logs.String(), token) {
		t.Error("the bot token appears in the log")
	}

	// A restart resumes from the stored offset: nothing is answered twice.
	llmCalls := len(llm.Requests())
	_, _, stop = serveInProcess(t, cfg, "restarted serve")
	if _, err := fake.WaitCalls(wctx, "getUpdates", len(fake.Calls("getUpdates"))+2); err != nil {
		t.Fatalf("restarted adapter did not poll: %v", err)
	}
	stop()
	if n := len(fake.Calls("sendMessage")); n != 1 {
		t.Fatalf("after restart sendMessage calls = %d, want still 1", n)
	}
	if n := len(llm.Requests()); n != llmCalls {
		t.Fatalf("after restart the model was called %d more times", n-llmCalls)
	}
}

// TestServeOneAccountFailingKeepsOthers: a Telegram account whose token the Bot API
// refuses stops alone; the other account keeps answering and /healthz says so.
func TestServeOneAccountFailingKeepsOthers(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("still here") })
	const good = "123456:GOOD"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: good, ID: 900000001, Username: "openbot_chief_bot"})
	defer fake.Close()
	dir := t.TempDir()
	path := exampleConfig(t, dir, `
telegram:
  - name: chief
    bot: chief_of_staff
    token: `+good+`
    api_endpoint: `+fake.URL()+`
    allow_users: ["100000001"]
  - name: broken
    bot: engineer
    token: "999:REVOKED"
    api_endpoint: `+fake.URL()+"\n")
	cfg := testConfig(t, path, map[string]string{"OPENAI_BASE_URL": llm.URL()})
	listen, logs, stop := serveInProcess(t, cfg, "serve")
	update, _ := os.ReadFile("../../adapters/telegram/testdata/updates/01_private_text.json")
	if _, err := fake.PushUpdate(good, update); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := fake.WaitCalls(wctx, "sendMessage", 1); err != nil {
		t.Fatalf("the good account did not answer: %v\n%s", err, logs.String())
	}
	var body string
	waitUntil(t, "/healthz to name the failed account", func() bool {
		var code int
		code, body = healthz(t, listen)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "telegram/broken: failed")
	})
	if !strings.Contains(body, "degraded") || !strings.Contains(body, "telegram/chief: started") {
		t.Fatalf("/healthz = %q", body)
	}
	// serve still answered /healthz after the account failed; it ends cleanly
	// only when stopped (stop fails the test on any other exit).
	stop()
	if !strings.Contains(logs.String(), "telegram/broken stopped") || strings.Contains(logs.String(), "REVOKED") {
		t.Errorf("want one line naming the stopped account and no token in the output:\n%s", logs.String())
	}
}
