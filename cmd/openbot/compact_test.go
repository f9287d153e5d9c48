package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

// compactingModel answers compaction calls with a summary that keeps the
// thread's code word, and everything else with a plain answer.
func compactingModel(t *testing.T) *openaitest.Server {
	llm := openaitest.New(t)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You compact a chat thread") {
			return openaitest.Text("Summary: the code word is PELICAN-9.")
		}
		return openaitest.Text("noted")
	})
	return llm
}

func compactions(llm *openaitest.Server) int {
	n := 0
	for _, r := range llm.Requests() {
		if strings.HasPrefix(r.Body.Messages[0].Content, "You compact a chat thread") {
			n++
		}
	}
	return n
}

// TestChatCompact: /compact in the terminal compacts the thread now: the bot
// answers with what it summarised, the summary is stored as a message of its
// own kind that `openbot thread ID` shows and the chat never printed, and the
// next run's history starts with it.
func TestChatCompact(t *testing.T) {
	llm := compactingModel(t)
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL()}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("the code word is PELICAN-9\n"), env)
	if r.code != 0 {
		t.Fatalf("chat: exit %d: %s", r.code, r.stderr)
	}
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("/compact\n"), env)
	if r.code != 0 || !strings.Contains(r.stdout, "Compacted: 2 messages up to #2 summarised") {
		t.Fatalf("/compact: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "PELICAN") || compactions(llm) != 1 {
		t.Errorf("the summary was printed, or compactions = %d (want 1):\n%s", compactions(llm), r.stdout)
	}
	r = runFor(t, []string{"thread", "1", "--config", cfg}, nil, env)
	if r.code != 0 || !strings.Contains(r.stdout, "[summary of #1-#2, not posted]: Summary: the code word is PELICAN-9.") {
		t.Fatalf("openbot thread 1: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("what was the code word?\n"), env)
	if r.code != 0 {
		t.Fatalf("chat: exit %d: %s", r.code, r.stderr)
	}
	reqs := llm.Requests()
	if first := reqs[len(reqs)-1].Body.Messages[1].Content; !strings.Contains(first, "PELICAN-9") || !strings.Contains(first, "Your summary of this thread") {
		t.Errorf("the next run's history starts with %.200q, want the summary", first)
	}
}

const compacted = "Compacted: 2 messages up to #2 summarised"

// TestCompactTelegram: /compact in a Telegram private chat.
func TestCompactTelegram(t *testing.T) {
	llm := compactingModel(t)
	const token = "123456:TEST"
	fake := telegramtest.NewServer(telegramtest.Bot{Token: token, ID: 900000001, Username: "openbot_chief_bot"})
	defer fake.Close()
	_, logs := serveWith(t, llm, `
telegram:
  - name: chief
    bot: chief_of_staff
    token: ${TELEGRAM_TOKEN}
    api_endpoint: `+fake.URL()+`
    allow_users: ["100000001"]
`, map[string]string{"TELEGRAM_TOKEN": token})
	update := func(id int, text string) []byte {
		return fmt.Appendf(nil, `{"update_id": %d, "message": {"message_id": %d,
			"from": {"id": 100000001, "is_bot": false, "first_name": "Alice"},
			"chat": {"id": 100000001, "first_name": "Alice", "type": "private"},
			"date": 1767225600, "text": %q%s}}`, 500000000+id, 10+id, text, entities(text))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	say := func(id int, text, want string) {
		t.Helper()
		if _, err := fake.PushUpdate(token, update(id, text)); err != nil {
			t.Fatal(err)
		}
		err := fake.Wait(ctx, func(s *telegramtest.Server) bool {
			for _, m := range s.Messages(token) {
				if strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("no %q in the chat: %+v\n%s", want, fake.Messages(token), logs.String())
		}
	}
	say(1, "the code word is PELICAN-9", "noted")
	say(2, "/compact", compacted)
	if compactions(llm) != 1 {
		t.Errorf("compactions = %d, want 1", compactions(llm))
	}
	for _, m := range fake.Messages(token) {
		if strings.Contains(m.Text, "PELICAN") {
			t.Errorf("the summary was posted: %q", m.Text)
		}
	}
}

// entities marks a leading /command as Telegram does.
func entities(text string) string {
	if !strings.HasPrefix(text, "/") {
		return ""
	}
	return fmt.Sprintf(`, "entities": [{"type": "bot_command", "offset": 0, "length": %d}]`, len(strings.Fields(text)[0]))
}

// TestCompactSlack: "@app /compact" as a reply in the conversation's Slack
// thread.
func TestCompactSlack(t *testing.T) {
	llm := compactingModel(t)
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer fake.Close()
	_, logs := serveWith(t, llm, `
slack:
  - name: acme
    bot: "*"
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
    api_url: `+fake.APIURL()+"\n", map[string]string{"SLACK_APP_TOKEN": "xapp-test", "SLACK_BOT_TOKEN": "xoxb-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.WaitConnected(ctx); err != nil {
		t.Fatalf("socket mode never connected: %v\n%s", err, logs.String())
	}
	frame, err := os.ReadFile("../../adapters/slack/testdata/fixtures/socket_mode_events_api_app_mention.json")
	if err != nil {
		t.Fatal(err)
	}
	say := func(n int, text, want string) {
		t.Helper()
		f := strings.NewReplacer("can you review the failing build on main?", text,
			"000000000001", fmt.Sprintf("00000000000%d", n), "Ev0TEST00001", fmt.Sprintf("Ev0TEST0000%d", n)).Replace(string(frame))
		if n > 1 { // a reply in the first message's Slack thread
			f = strings.Replace(f, `"ts": "1767225600.000100"`, fmt.Sprintf(`"ts": "1767225600.00010%d", "thread_ts": "1767225600.000100"`, n), 1)
		}
		if err := fake.Push(ctx, []byte(f)); err != nil {
			t.Fatal(err)
		}
		err := fake.Wait(ctx, func(s *slacktest.Server) bool {
			for _, m := range s.Messages() {
				if strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("no %q in Slack: %+v\n%s", want, fake.Messages(), logs.String())
		}
	}
	say(1, "the code word is PELICAN-9", "noted")
	say(2, "/compact", compacted)
	if compactions(llm) != 1 {
		t.Errorf("compactions = %d, want 1", compactions(llm))
	}
}

// TestCompactFeishu: /compact in a Feishu direct chat.
func TestCompactFeishu(t *testing.T) {
	llm := compactingModel(t)
	fake := feishutest.New(t)
	defer fake.Close()
	_, logs := serveWith(t, llm, `
feishu:
  - name: acme
    bot: chief_of_staff
    mode: websocket
    app_id: ${FEISHU_APP_ID}
    app_secret: ${FEISHU_APP_SECRET}
    verification_token: `+feishutest.VerificationToken+`
    encrypt_key: `+feishutest.EncryptKey+`
    allow_users: [`+feishutest.AliceOpenID+`]
    base_url: `+fake.URL()+"\n", map[string]string{"FEISHU_APP_ID": feishutest.AppID, "FEISHU_APP_SECRET": feishutest.AppSecret})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.WaitConnections(ctx, 1); err != nil {
		t.Fatalf("no long connection: %v\n%s", err, logs.String())
	}
	say := func(n int, text, want string) {
		t.Helper()
		ev := feishutest.MessageEvent{MessageID: fmt.Sprintf("om_compact_%d", n), ChatType: "p2p", ChatID: "oc_p2p_alice", Text: text}.JSON()
		if _, err := fake.PushEvent(ctx, ev, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.WaitMessage(ctx, func(m feishutest.Message) bool { return strings.Contains(m.Text(), want) }); err != nil {
			t.Fatalf("no %q in Feishu: %v\n%s", want, err, logs.String())
		}
	}
	say(1, "the code word is PELICAN-9", "noted")
	say(2, "/compact", compacted)
	if compactions(llm) != 1 {
		t.Errorf("compactions = %d, want 1", compactions(llm))
	}
}
