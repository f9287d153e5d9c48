package slacktest

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

func TestWebAPIThroughSlackGo(t *testing.T) {
	s := New(Options{BotToken: "xoxb-1"})
	defer s.Close()
	s.AddUser(User{ID: "U1", Name: "alice", RealName: "Alice A", DisplayName: "Alice"})
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()))
	ctx := t.Context()

	res, err := api.AuthTestContext(ctx)
	if err != nil || res.UserID != DefaultBotUser || res.TeamID != DefaultTeam {
		t.Fatalf("auth.test = %+v, %v", res, err)
	}
	u, err := api.GetUserInfoContext(ctx, "U1")
	if err != nil || u.Profile.DisplayName != "Alice" || u.RealName != "Alice A" {
		t.Fatalf("users.info = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U404"); err == nil {
		t.Error("unknown user answered")
	}

	s.FailAfter("chat.postMessage", 1, http.StatusTooManyRequests, "", 3*time.Second)
	ch, ts1, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("one", false), slack.MsgOptionTS("1.1"))
	if err != nil || ch != "C1" || ts1 == "" {
		t.Fatalf("post = %q %q %v", ch, ts1, err)
	}
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("two", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("scripted 429: %v", err)
	}
	_, ts3, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("three", false))
	if err != nil || ts3 <= ts1 {
		t.Fatalf("post after 429 = %q %v", ts3, err)
	}
	posts := s.CallsTo("chat.postMessage")
	if len(posts) != 3 || posts[0].Form.Get("thread_ts") != "1.1" || posts[0].Form.Has("token") {
		t.Errorf("recorded posts %+v", posts)
	}

	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(s.APIURL()))
	if _, err := bad.AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Errorf("wrong token: %v", err)
	}
}

// TestForget: Forget drops the recorded calls and messages; the fake goes on
// answering, and a delete of a forgotten message fails as for an unknown one.
func TestForget(t *testing.T) {
	s := New(Options{BotToken: "xoxb-1"})
	defer s.Close()
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()))
	ctx := t.Context()
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("one", false))
	if err != nil {
		t.Fatal(err)
	}
	s.Forget()
	if c, m := s.Calls(), s.Messages(); len(c) != 0 || len(m) != 0 {
		t.Fatalf("after Forget: calls %+v, messages %+v", c, m)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C1", ts); err == nil {
		t.Error("delete of a forgotten message succeeded")
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("three", false)); err != nil || len(s.Messages()) != 1 {
		t.Fatalf("post after Forget: %v, messages %+v", err, s.Messages())
	}
}

func TestWaitHonoursContext(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.WaitConnected(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitConnected = %v, want deadline exceeded", err)
	}
	if err := s.Push(ctx, []byte("{}")); err == nil {
		t.Error("Push without a client succeeded")
	}
}

// TestConversationsOpen: the DM channel of a person, already_open the second
// time, and Slack's refusals for a bot user and a token without im:write.
func TestConversationsOpen(t *testing.T) {
	s := New(Options{BotToken: "xoxb-1"})
	defer s.Close()
	s.AddUser(User{ID: "U1", Name: "alice"})
	s.AddUser(User{ID: "U2", Name: "ci", IsBot: true})
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()))
	ctx := t.Context()
	open := func(api *slack.Client, user string) (string, bool, error) {
		ch, _, already, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
		if ch == nil {
			return "", already, err
		}
		return ch.ID, already, err
	}
	if id, already, err := open(api, "U1"); err != nil || id != "D1" || already {
		t.Fatalf("first open = %q %v %v", id, already, err)
	}
	if id, already, err := open(api, "U1"); err != nil || id != "D1" || !already {
		t.Fatalf("second open = %q %v %v", id, already, err)
	}
	for user, want := range map[string]string{"U2": "cannot_dm_bot", "U404": "user_not_found"} {
		if _, _, err := open(api, user); err == nil || err.Error() != want {
			t.Errorf("open %s: %v, want %s", user, err, want)
		}
	}
	scoped := New(Options{BotToken: "xoxb-1", Scopes: []string{"chat:write"}})
	defer scoped.Close()
	scoped.AddUser(User{ID: "U1", Name: "alice"})
	if _, _, err := open(slack.New("xoxb-1", slack.OptionAPIURL(scoped.APIURL())), "U1"); err == nil || err.Error() != "missing_scope" {
		t.Errorf("without im:write: %v, want missing_scope", err)
	}
}
