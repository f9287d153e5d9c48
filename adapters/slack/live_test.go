package slack

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"openbot/adapters/slack/slacktest"
)

// TestPulseFollowsTheSocket: no pulse before Run or in http mode; once Socket
// Mode is connected Pulse is set, and a frame Slack sends moves it on.
func TestPulseFollowsTheSocket(t *testing.T) {
	h := newEnv(t, nil)
	if p := h.a.Pulse(); !p.IsZero() {
		t.Errorf("http mode pulse %v, want zero", p)
	}

	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.SigningSecret = "" })
	if p := e.a.Pulse(); !p.IsZero() {
		t.Errorf("pulse %v before Run, want zero", p)
	}
	runAdapter(t, e.a)
	ctx := waitCtx(t)
	select {
	case <-e.a.IngressReady():
	case <-ctx.Done():
		t.Fatal("socket mode never said hello")
	}
	before := e.a.Pulse()
	if before.IsZero() {
		t.Fatal("no pulse after hello")
	}
	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000001"); err != nil {
		t.Fatalf("no ack: %v", err)
	}
	if after := e.a.Pulse(); !after.After(before) {
		t.Errorf("pulse %v after an envelope, want after %v", after, before)
	}
	if d := time.Since(e.a.Pulse()); d < 0 || d > 10*time.Second {
		t.Errorf("pulse %v ago", d)
	}
}

// TestLastPostFollowsAcceptedPosts: LastPost stays zero while Slack refuses
// the post and moves when it accepts a chat.postMessage and a chat.update.
func TestLastPostFollowsAcceptedPosts(t *testing.T) {
	e := newEnv(t, nil)
	e.slack.FailNext("chat.postMessage", http.StatusOK, "channel_not_found", 0)
	if _, err := e.a.Deliver(t.Context(), delivery("hi")); err == nil {
		t.Fatal("refused post delivered")
	}
	if p := e.a.LastPost(); !p.IsZero() {
		t.Errorf("last post %v after a refused post, want zero", p)
	}
	ts, err := e.a.Deliver(t.Context(), delivery("hi"))
	if err != nil {
		t.Fatal(err)
	}
	posted := e.a.LastPost()
	if posted.IsZero() {
		t.Fatal("no last post after chat.postMessage")
	}
	conv, err := ParseConversation(delivery("").Conversation)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.update(t.Context(), conv, ts, "hi again"); err != nil {
		t.Fatal(err)
	}
	if p := e.a.LastPost(); !p.After(posted) {
		t.Errorf("last post %v after chat.update, want after %v", p, posted)
	}
}

// TestRateLimitedCountsEvery429: Slack's rate limit (HTTP 429 with
// Retry-After, answered by the fake as Slack does) is counted for every Web
// API call: a post, which slack-go returns as *slack.RateLimitedError with the
// same wait, a 429 without Retry-After (counted, no wait), and Socket Mode's
// own apps.connections.open, which slack-go retries after the wait.
func TestRateLimitedCountsEvery429(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.SigningSecret = "" })
	if n, d := e.a.RateLimited(); n != 0 || d != 0 {
		t.Fatalf("RateLimited() = %d, %s before any call", n, d)
	}
	e.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "", 2*time.Second)
	_, err := e.a.Deliver(t.Context(), delivery("hi"))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("Deliver = %v, want slack-go's RateLimitedError asking for 2s", err)
	}
	if n, d := e.a.RateLimited(); n != 1 || d != 2*time.Second {
		t.Errorf("RateLimited() = %d, %s after one 429, want 1, 2s", n, d)
	}
	e.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "", 0)
	if _, err := e.a.Deliver(t.Context(), delivery("hi")); err == nil {
		t.Fatal("a 429 without Retry-After delivered")
	}
	if _, err := e.a.Deliver(t.Context(), delivery("hi")); err != nil {
		t.Fatal(err)
	}
	if n, d := e.a.RateLimited(); n != 2 || d != 2*time.Second {
		t.Errorf("RateLimited() = %d, %s after a 429 without a wait and a post, want 2, 2s", n, d)
	}

	e.slack.FailNext("apps.connections.open", http.StatusTooManyRequests, "", time.Second)
	runAdapter(t, e.a)
	select {
	case <-e.a.IngressReady():
	case <-waitCtx(t).Done():
		t.Fatal("socket mode never connected after the rate limit")
	}
	if n, d := e.a.RateLimited(); n != 3 || d != 3*time.Second {
		t.Errorf("RateLimited() = %d, %s after apps.connections.open was limited, want 3, 3s", n, d)
	}
}

// TestReconnectReplacesASilentSocket: a websocket that went quiet without
// closing (the fake sends nothing more on it) brings no pulse; Reconnect ends
// it and a new connection takes envelopes again and moves the pulse on.
func TestReconnectReplacesASilentSocket(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket; o.SigningSecret = "" })
	e.a.Reconnect() // before Run: nothing to end
	runAdapter(t, e.a)
	ctx := waitCtx(t)
	select {
	case <-e.a.IngressReady():
	case <-ctx.Done():
		t.Fatal("socket mode never said hello")
	}
	e.slack.Silence()
	silent := e.a.Pulse()
	e.a.Reconnect()
	if err := e.slack.Wait(ctx, func(s *slacktest.Server) bool { open, total := s.Connections(); return open == 1 && total == 2 }); err != nil {
		open, total := e.slack.Connections()
		t.Fatalf("after Reconnect %d open of %d connections, want the silent one closed and a new one: %v", open, total, err)
	}
	if err := e.slack.Push(ctx, fixture(t, "socket_mode_events_api_app_mention.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "5f0e3a2b-0000-4c1d-9e8f-000000000001"); err != nil {
		t.Fatalf("the new connection acks nothing: %v", err)
	}
	if !e.a.Pulse().After(silent) {
		t.Errorf("pulse %v after the new connection, want after %v", e.a.Pulse(), silent)
	}
}
