package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/internal/runtest"
)

// TestReloadAddsAndRemovesAccount: a reload adds a Telegram account, which starts
// polling and answers its chat; a later reload removes it, which stops it (no more
// getUpdates) and takes it off /healthz, while the rest keeps running.
func TestReloadAddsAndRemovesAccount(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("answered") })
	const token = "123456:RELOAD"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000001, Username: "openbot_chief_bot"})
	defer fake.Close()
	update, err := os.ReadFile("../../adapters/telegram/testdata/updates/01_private_text.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.PushUpdate(token, update); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "TELEGRAM_TOKEN": token}
	dir := t.TempDir()
	const team = "  - {handle: chief_of_staff}\n"
	path := reloadConfig(t, dir, team)

	stdin, feed := io.Pipe()
	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"chat", "--config", path}, stdin, &out, &errb, envOf(env)) }()

	logText := waitLog(t, dir, "account started")
	addr := regexp.MustCompile(`"http listening" addr=(\S+)`).FindStringSubmatch(logText)
	if addr == nil {
		t.Fatalf("no listener address in the log:\n%s", logText)
	}
	get := func(method, path string) string {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr[1]+path, nil)
		req.Header.Set("Authorization", "Bearer "+reloadToken)
		_, body := runtest.Do(t, req)
		return body
	}

	reloadConfig(t, dir, team+`telegram:
  - name: chief
    bot: chief_of_staff
    token: ${TELEGRAM_TOKEN}
    api_endpoint: `+fake.URL()+`
    allow_users: ["100000001"]
`)
	if body := get(http.MethodPost, "/admin/reload"); !strings.Contains(body, "account telegram/chief added") {
		t.Fatalf("reload adding the account said:\n%s", body)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := fake.WaitCalls(wctx, "sendMessage", 1); err != nil {
		t.Fatalf("the added account never answered: %v", err)
	}
	if h := get(http.MethodGet, "/healthz"); !strings.Contains(h, "telegram/chief: started") {
		t.Fatalf("healthz after adding:\n%s", h)
	}

	reloadConfig(t, dir, team)
	if body := get(http.MethodPost, "/admin/reload"); !strings.Contains(body, "account telegram/chief removed") {
		t.Fatalf("reload removing the account said:\n%s", body)
	}
	polls := len(fake.Calls("getUpdates"))
	if h := get(http.MethodGet, "/healthz"); strings.Contains(h, "telegram/chief") {
		t.Fatalf("healthz still lists the removed account:\n%s", h)
	}
	// The terminal still works; the removed account polls no more.
	if _, err := io.WriteString(feed, "hello\n"); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("chat exit %d; stderr:\n%s", code, errb.String())
		}
	case <-ctx.Done():
		t.Fatal("chat did not end")
	}
	if got := out.String(); got != "[chief_of_staff] answered\n" {
		t.Fatalf("terminal:\n%s", got)
	}
	if n := len(fake.Calls("getUpdates")); n != polls {
		t.Fatalf("the removed account polled %d more times", n-polls)
	}
}
