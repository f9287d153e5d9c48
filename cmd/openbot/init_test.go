package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

// initWorld is a new user's world: a model server, Slack and Telegram, all fakes.
type initWorld struct {
	llm   *openaitest.Server
	slack *slacktest.Server
	tg    *telegramtest.Server
	dir   string
	cfg   string
	addr  string
}

const initTGToken = "123456:init-test"

func newInitWorld(t *testing.T) *initWorld {
	t.Helper()
	w := &initWorld{dir: t.TempDir()}
	w.cfg = filepath.Join(w.dir, "config.yaml")
	w.llm = openaitest.New(t)
	w.llm.SetModels("m")
	w.llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("hello from your bot") })
	w.slack = slacktest.New(slacktest.Options{BotToken: "xoxb-init", AppToken: "xapp-init", Scopes: slackScopes})
	t.Cleanup(w.slack.Close)
	w.tg = telegramtest.NewServer(telegramtest.Bot{Token: initTGToken, ID: 123456, Username: "team_bot"})
	t.Cleanup(w.tg.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	ln.Close()
	return w
}

func (w *initWorld) flags(extra ...string) []string {
	return append([]string{"init", "--non-interactive", "--config", w.cfg, "--listen", w.addr,
		"--base-url", w.llm.URL(), "--api-key", "sk-init-secret", "--model", "m",
		"--slack-bot-token", "xoxb-init", "--slack-app-token", "xapp-init", "--slack-api-url", w.slack.APIURL(),
		"--telegram-token", initTGToken, "--telegram-api", w.tg.URL(), "--owner", "telegram:4242"}, extra...)
}

// TestInitToAnswers is the first ten minutes, kept as a test: `openbot init`
// (its flags, as a script gives them) checks the tokens and the model and
// writes a config and a private .env; that config passes `config check` and
// `doctor`, and `openbot serve` on it, with nothing in the environment and no
// file edited by hand, answers a Telegram DM and a Slack mention.
func TestInitToAnswers(t *testing.T) {
	w := newInitWorld(t)
	r := runFor(t, w.flags("--channels", "slack,telegram", "--systemd"), nil, map[string]string{})
	if r.code != 0 {
		t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "openbot serve --config "+w.cfg) {
		t.Errorf("init did not end with the command to start:\n%s", r.stdout)
	}
	st, err := os.Stat(filepath.Join(w.dir, ".env"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf(".env: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	cfgText, _ := os.ReadFile(w.cfg)
	for _, secret := range []string{"sk-init-secret", "xoxb-init", "xapp-init", initTGToken} {
		if strings.Contains(string(cfgText), secret) {
			t.Errorf("config.yaml holds the secret %q:\n%s", secret, cfgText)
		}
	}
	if !strings.Contains(string(cfgText), `owners: ["telegram:4242"]`) {
		t.Errorf("config.yaml does not make the --owner an owner:\n%s", cfgText)
	}
	if n := strings.Count(string(cfgText), "\n"); n > 60 {
		t.Errorf("config.yaml is %d lines; want a short one", n)
	}
	if unit, err := os.ReadFile(filepath.Join(w.dir, "openbot.service")); err != nil || !strings.Contains(string(unit), "serve --config "+w.cfg) {
		t.Errorf("openbot.service: %v\n%s", err, unit)
	}
	none := map[string]string{}
	if r := runFor(t, []string{"config", "check", "--config", w.cfg}, nil, none); r.code != 0 {
		t.Fatalf("config check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runFor(t, []string{"doctor", "--config", w.cfg}, nil, none); r.code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", w.cfg, "--log-level", "debug"}, strings.NewReader(""), &out, &errb, envOf(none))
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()

	dm := `{"update_id": 1, "message": {"message_id": 10, "date": 1767225600, "text": "hi bot",
	  "from": {"id": 4242, "is_bot": false, "first_name": "Ann"}, "chat": {"id": 4242, "type": "private", "first_name": "Ann"}}}`
	if _, err := w.tg.PushUpdate(initTGToken, []byte(dm)); err != nil {
		t.Fatal(err)
	}
	answered := func(s *telegramtest.Server) bool {
		for _, m := range s.Messages(initTGToken) {
			if strings.Contains(m.Text, "hello from your bot") {
				return true
			}
		}
		return false
	}
	if err := w.tg.Wait(wctx, answered); err != nil {
		t.Fatalf("no answer to the Telegram DM: %v (calls %+v)\n%s\nmodel requests %d", err, w.tg.Calls(), errb.String(), len(w.llm.Requests()))
	}

	if err := w.slack.WaitConnected(wctx); err != nil {
		t.Fatalf("Slack socket mode never connected: %v\n%s", err, errb.String())
	}
	frame, err := os.ReadFile("../../adapters/slack/testdata/fixtures/socket_mode_events_api_app_mention.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.slack.Push(wctx, frame); err != nil {
		t.Fatal(err)
	}
	if err := w.slack.Wait(wctx, func(s *slacktest.Server) bool {
		ms := s.Messages()
		return len(ms) > 0 && strings.Contains(ms[len(ms)-1].Text, "hello from your bot")
	}); err != nil {
		t.Fatalf("no answer to the Slack mention: %v (%+v)\n%s", err, w.slack.Messages(), errb.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exit %d:\n%s", code, errb.String())
		}
	case <-time.After(shutdownBound + 5*time.Second):
		t.Fatal("serve did not stop within its bound")
	}
}

// TestInitAgainAddsAChannel: run again, init keeps the config as it is and
// appends the channel asked for; a channel it has is kept, not asked again.
func TestInitAgainAddsAChannel(t *testing.T) {
	w := newInitWorld(t)
	if r := runFor(t, w.flags("--channels", "telegram"), nil, map[string]string{}); r.code != 0 {
		t.Fatalf("first init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	before, _ := os.ReadFile(w.cfg)
	if err := os.WriteFile(w.cfg, append(before, []byte("# my own note\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, w.flags("--channels", "telegram,slack"), nil, map[string]string{})
	if r.code != 0 || !strings.Contains(r.stdout, "telegram is already configured") {
		t.Fatalf("second init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after, _ := os.ReadFile(w.cfg)
	if !strings.HasPrefix(string(after), string(before)+"# my own note\n") || !strings.Contains(string(after), "\nslack:\n") {
		t.Errorf("the second init did not keep the config and add slack:\n%s", after)
	}
	env, _ := os.ReadFile(filepath.Join(w.dir, ".env"))
	if !strings.Contains(string(env), "TELEGRAM_BOT_TOKEN") || !strings.Contains(string(env), "SLACK_BOT_TOKEN") {
		t.Errorf(".env lost or lacks a secret:\n%s", env)
	}
}

// TestInitRefusesBadInput: a refused token or model, and an unknown channel,
// end init with a clear error and write nothing.
func TestInitRefusesBadInput(t *testing.T) {
	w := newInitWorld(t)
	for name, tc := range map[string]struct {
		args []string
		say  string
	}{
		"telegram token": {w.flags("--channels", "telegram", "--telegram-token", "999:wrong"), "telegram: the tokens are missing or the check failed"},
		"model":          {w.flags("--channels", "terminal", "--base-url", "http://127.0.0.1:1/v1", "--timeout", "2s"), "the model check failed"},
		"channel":        {w.flags("--channels", "irc"), `unknown channel "irc"`},
		"key spaces":     {w.flags("--channels", "terminal", "--api-key", " sk-x "), "--api-key: the key has spaces"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runFor(t, tc.args, nil, map[string]string{})
			if r.code == 0 || !strings.Contains(r.stderr, tc.say) {
				t.Errorf("exit %d, stderr %q; want a refusal saying %q", r.code, r.stderr, tc.say)
			}
			if _, err := os.Stat(w.cfg); err == nil {
				t.Errorf("init wrote %s although it failed", w.cfg)
			}
		})
	}
}

// TestInitAsksOnPipedInput: without --non-interactive, init asks its questions
// (huh's accessible prompts when the input is not a terminal) and uses the answers.
func TestInitAsksOnPipedInput(t *testing.T) {
	w := newInitWorld(t)
	answers := strings.Join([]string{
		"1", "0", // channels: toggle "terminal", then done
		"1",                  // model API: OpenAI-compatible
		w.llm.URL(), "m", "", // base URL, model, key (none)
		"", // owner: none yet
	}, "\n") + "\n"
	r := runFor(t, []string{"init", "--config", w.cfg, "--listen", w.addr}, strings.NewReader(answers), map[string]string{})
	if r.code != 0 {
		t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	text, _ := os.ReadFile(w.cfg)
	if !strings.Contains(string(text), "console:") || !strings.Contains(string(text), "base_url: "+w.llm.URL()) {
		t.Errorf("config from the answers:\n%s", text)
	}
	if !strings.Contains(r.stdout, "openbot chat --config "+w.cfg) {
		t.Errorf("init did not say how to start a terminal-only team:\n%s", r.stdout)
	}
}
