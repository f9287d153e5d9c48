package slack

import (
	"net/http"
	"testing"
	"time"
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
