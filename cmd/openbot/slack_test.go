package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
)

// TestServeSlackAppMention runs the real wiring with a Slack account pointed at the
// fake Slack (DESIGN.md §3): a fixture app_mention over Socket Mode gets the
// default bot's answer in the mention's Slack thread.
func TestServeSlackAppMention(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("On it: the build fails in **step 3**."))
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer fake.Close()

	dir := t.TempDir()
	path := exampleConfig(t, dir, `
slack:
  - name: acme
    bot: "*"
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
    api_url: `+fake.APIURL()+"\n")
	cfg := testConfig(t, path, map[string]string{
		"OPENAI_BASE_URL": llm.URL(), "SLACK_APP_TOKEN": "xapp-test", "SLACK_BOT_TOKEN": "xoxb-test",
	})
	_, logs, stop := serveInProcess(t, cfg, "serve")
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := fake.WaitConnected(wctx); err != nil {
		t.Fatalf("socket mode never connected: %v\n%s", err, logs.String())
	}
	frame, err := os.ReadFile("../../adapters/slack/testdata/fixtures/socket_mode_events_api_app_mention.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Push(wctx, frame); err != nil {
		t.Fatal(err)
	}
	calls, err := fake.WaitCalls(wctx, "chat.postMessage", 1)
	if err != nil {
		t.Fatalf("no reply posted: %v\n%s", err, logs.String())
	}
	post := calls[0]
	if post.Form.Get("channel") != "C0TEST001" || post.Form.Get("thread_ts") != "1767225600.000100" {
		t.Errorf("reply went to channel %q thread_ts %q, want C0TEST001 / 1767225600.000100 (form %v)",
			post.Form.Get("channel"), post.Form.Get("thread_ts"), post.Form)
	}
	// Streaming is on by default: the posted message is edited into the answer.
	final := func(s *slacktest.Server) bool {
		ms := s.Messages()
		return len(ms) == 1 && ms[0].Text == "On it: the build fails in *step 3*."
	}
	if err := fake.Wait(wctx, final); err != nil {
		t.Errorf("the thread does not end with the model's answer in mrkdwn: %+v (%v)", fake.Messages(), err)
	}
	if got := openaitest.LastUserText(llm.Requests()[0]); !strings.Contains(got, "can you review the failing build on main?") {
		t.Errorf("model saw %q", got)
	}
	stop()
	if strings.Contains(logs.String(), "xoxb-test") || strings.Contains(logs.String(), "xapp-test") {
		t.Error("a Slack token appears in the log")
	}
}
