package feishu_test

import (
	"errors"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// TestPulseFollowsTheLongConnection: no pulse before Run or in webhook mode;
// once the long connection is up Pulse is set, and a frame the server sends
// moves it on.
func TestPulseFollowsTheLongConnection(t *testing.T) {
	w := newHarness(t, nil)
	w.run()
	if p := w.a.Pulse(); !p.IsZero() {
		t.Errorf("webhook mode pulse %v, want zero", p)
	}

	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	if p := h.a.Pulse(); !p.IsZero() {
		t.Errorf("pulse %v before Run, want zero", p)
	}
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select { // the pulse is stored before the ingress is marked live
	case <-h.a.IngressReady():
	case <-ctx.Done():
		t.Fatal("long connection never up")
	}
	before := h.a.Pulse()
	if before.IsZero() {
		t.Fatal("no pulse once connected")
	}
	id, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.WaitAck(ctx, id); err != nil {
		t.Fatal(err)
	}
	if after := h.a.Pulse(); !after.After(before) {
		t.Errorf("pulse %v after an event frame, want after %v", after, before)
	}
	if d := time.Since(h.a.Pulse()); d < 0 || d > 10*time.Second {
		t.Errorf("pulse %v ago", d)
	}
}

// TestLastPostFollowsAcceptedPosts: LastPost stays zero while Feishu refuses
// the message and moves when it accepts a message and a card patch.
func TestLastPostFollowsAcceptedPosts(t *testing.T) {
	h := newHarness(t, nil)
	ctx := ctxT(t)
	d := core.Delivery{Outbox: 1, Conversation: core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage), Text: "hi"}
	h.srv.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/messages", Code: feishu.CodeBotNotInChat, Msg: "Bot/User can NOT be out of the chat."})
	var de core.DeliveryError
	if _, err := h.a.Deliver(ctx, d); !errors.As(err, &de) {
		t.Fatalf("refused message: %v, want a DeliveryError", err)
	}
	if p := h.a.LastPost(); !p.IsZero() {
		t.Errorf("last post %v after a refused message, want zero", p)
	}
	id, err := h.a.Deliver(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	posted := h.a.LastPost()
	if posted.IsZero() {
		t.Fatal("no last post after a message was accepted")
	}
	if err := h.a.UpdateCard(ctx, id, "✅ Approved by **Alice**"); err != nil {
		t.Fatal(err)
	}
	if p := h.a.LastPost(); !p.After(posted) {
		t.Errorf("last post %v after a card patch, want after %v", p, posted)
	}
}

// TestRateLimitedCountsEveryLimit: Feishu's rate limit (HTTP 429, code
// 99991400 and x-ogw-ratelimit-reset, answered by the fake as Feishu does) is
// counted for every Open API call: one waited out and retried inside Deliver,
// one handed to the outbox with its wait, and the long connection's endpoint
// discovery.
func TestRateLimitedCountsEveryLimit(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	ctx := ctxT(t)
	if n, d := h.a.RateLimited(); n != 0 || d != 0 {
		t.Fatalf("RateLimited() = %d, %s before any call", n, d)
	}
	d := core.Delivery{Outbox: 1, Conversation: core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage), Text: "hi"}
	h.srv.RateLimitNext("/open-apis/im/v1/messages", 0)
	if _, err := h.a.Deliver(ctx, d); err != nil {
		t.Fatalf("rate limited once, then retried: %v", err)
	}
	if n, w := h.a.RateLimited(); n != 1 || w != 0 {
		t.Errorf("RateLimited() = %d, %s after a limit with reset 0, want 1, 0s", n, w)
	}
	h.srv.RateLimitNext("/open-apis/im/v1/messages", 30)
	_, err := h.a.Deliver(ctx, d)
	var de core.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter() != 30*time.Second {
		t.Fatalf("Deliver = %v, want a DeliveryError asking for 30s", err)
	}
	if n, w := h.a.RateLimited(); n != 2 || w != 30*time.Second {
		t.Errorf("RateLimited() = %d, %s after a limit with reset 30, want 2, 30s", n, w)
	}

	h.srv.RateLimitNext("/callback/ws/endpoint", 1)
	h.run()
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatalf("no long connection after the rate limit: %v", err)
	}
	if n, w := h.a.RateLimited(); n != 3 || w != 31*time.Second {
		t.Errorf("RateLimited() = %d, %s after the endpoint was limited, want 3, 31s", n, w)
	}
}

// TestReconnectReplacesASilentConnection: a long connection that went quiet
// without closing (the fake answers its pings no more) brings no pulse;
// Reconnect ends it and a new connection takes events again and moves the pulse
// on.
func TestReconnectReplacesASilentConnection(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	h.a.Reconnect() // before Run: nothing to end
	h.run()
	ctx := ctxT(t)
	select { // live: the session Reconnect ends is up
	case <-h.a.IngressReady():
	case <-ctx.Done():
		t.Fatal("long connection never up")
	}
	h.srv.Silence()
	silent := h.a.Pulse()
	h.a.Reconnect()
	if err := h.srv.WaitConnections(ctx, 2); err != nil {
		t.Fatalf("no new connection after Reconnect: %v", err)
	}
	id, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.WaitAck(ctx, id); err != nil {
		t.Fatalf("the new connection acks nothing: %v", err)
	}
	if !h.a.Pulse().After(silent) {
		t.Errorf("pulse %v after the new connection, want after %v", h.a.Pulse(), silent)
	}
}
