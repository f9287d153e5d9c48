package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// startFeishuAgent is startFeishuFixed (webhook mode) with the given agent,
// engine clock (nil: the system's) and streaming setting.
func startFeishuAgent(t *testing.T, agent core.Agent, clock core.Clock, streaming bool) *fsmRig {
	t.Helper()
	return startFeishu(t, feishutest.New(t), "", feishu.ModeWebhook, core.Options{Agent: agent, Clock: clock},
		func(o *feishu.Options) { o.Streaming = streaming })
}

// liveTexts is what a person sees in the chat now, message by message.
func liveTexts(f *feishutest.Server) []string {
	var out []string
	for _, m := range f.Live() {
		out = append(out, m.Text())
	}
	return out
}

func patches(f *feishutest.Server) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == http.MethodPatch {
			n++
		}
	}
	return n
}

func TestFeishuStreamEditsThrottled(t *testing.T) {
	clock := newStepClock()
	var r *fsmRig
	r = startFeishuAgent(t, &streamAgent{script: func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("Hel")
		if err := firstPost(ctx, clock, "the first card", func() bool { return sends(r.fake) == 1 }); err != nil {
			return "", err
		}
		for _, s := range []string{"Hello", "Hello w", "Hello wo", "Hello wor", "Hello worl"} {
			ts.StreamText(s)
		}
		ts.StreamWorking("shell")
		ts.StreamText("Hello world")
		err := until(ctx, clock, time.Second, "one update", func() bool { return strings.Join(liveTexts(r.fake), "|") == "Hello world" })
		return "Hello world, *all* of it.", err
	}}, clock, true)
	r.deliver(feishuFixture(t, "event_v2_im_message_receive_group_at_bot.json"))
	r.idle()
	if n := sends(r.fake); n != 1 {
		t.Errorf("messages sent = %d, want 1", n)
	}
	if n := patches(r.fake); n != 2 {
		t.Errorf("card updates = %d, want 2 (one throttled update, the final one)", n)
	}
	if got, want := liveTexts(r.fake), feishu.Format("Hello world, *all* of it."); len(got) != 1 || got[0] != want {
		t.Errorf("messages = %q, want the one final reply %q", got, want)
	}
	if m := r.fake.Live(); len(m) == 1 && (m[0].ReplyTo != fsmAtBotMsg || !m[0].InThread) {
		t.Errorf("the streamed reply went to %q (in thread %v), want a topic reply to %s", m[0].ReplyTo, m[0].InThread, fsmAtBotMsg)
	}
}

func TestFeishuStreamRateLimitedEditsEndWithOneCompleteMessage(t *testing.T) {
	clock := newStepClock()
	var r *fsmRig
	limit := func() { r.fake.RateLimitNext("/open-apis/im/v1/messages/om_fake", 1) }
	r = startFeishuAgent(t, &streamAgent{script: func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("one")
		if err := firstPost(ctx, clock, "the first card", func() bool { return sends(r.fake) == 1 }); err != nil {
			return "", err
		}
		limit()
		ts.StreamText("one two")
		if err := until(ctx, clock, time.Second, "an update after a 429", func() bool {
			return strings.Join(liveTexts(r.fake), "|") == "one two"
		}); err != nil {
			return "", err
		}
		limit() // the final update
		return "one two three four.", nil
	}}, clock, true)
	r.deliver(feishuFixture(t, "event_v2_im_message_receive_group_at_bot.json"))
	r.idle()
	if n := sends(r.fake); n != 1 {
		t.Errorf("messages sent = %d, want 1", n)
	}
	if n := patches(r.fake); n != 4 {
		t.Errorf("card updates = %d, want 4 (refused, update, refused final, final)", n)
	}
	if got := liveTexts(r.fake); len(got) != 1 || got[0] != "one two three four." {
		t.Errorf("messages = %q, want one complete reply", got)
	}
}

func TestFeishuStreamLongReplyIntoSecondMessage(t *testing.T) {
	clock := newStepClock()
	long := strings.Repeat("word ", feishu.MaxChunk/5+200)
	var r *fsmRig
	r = startFeishuAgent(t, &streamAgent{script: func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText(long[:100])
		if err := firstPost(ctx, clock, "the first card", func() bool { return sends(r.fake) == 1 }); err != nil {
			return "", err
		}
		ts.StreamText(long)
		if err := until(ctx, clock, time.Second, "a second card", func() bool { return len(r.fake.Live()) == 2 }); err != nil {
			return "", err
		}
		return long + "end.", nil
	}}, clock, true)
	r.deliver(feishuFixture(t, "event_v2_im_message_receive_group_at_bot.json"))
	r.idle()
	if n := sends(r.fake); n != 2 {
		t.Errorf("messages sent = %d, want 2", n)
	}
	got := liveTexts(r.fake)
	joined := strings.Join(strings.Fields(strings.Join(got, " ")), " ")
	if len(got) != 2 || joined != strings.TrimSpace(long+"end.") {
		t.Errorf("messages = %d, joined text ends %q", len(got), joined[max(0, len(joined)-20):])
	}
}

// waitingAgent replies once the fake shows a reaction on the trigger message.
type waitingAgent struct{ fake *feishutest.Server }

func (a *waitingAgent) Execute(ctx context.Context, _ *core.Job) (core.Result, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.fake.WaitReaction(wctx, fsmAtBotMsg); err != nil {
		return core.Result{}, err
	}
	return core.Result{Reply: "done"}, nil
}

// TestFeishuWorkIndicatorReaction: while the bot works on the @mention, the
// message carries the working reaction; once the run is over it is gone.
func TestFeishuWorkIndicatorReaction(t *testing.T) {
	agent := &waitingAgent{}
	r := startFeishuAgent(t, agent, nil, false)
	agent.fake = r.fake
	r.deliver(feishuFixture(t, "event_v2_im_message_receive_group_at_bot.json"))
	r.idle()
	if got := liveTexts(r.fake); len(got) != 1 || got[0] != "done" {
		t.Fatalf("messages = %q, want the reply (the run saw the reaction)", got)
	}
	if res := r.fake.Reactions(fsmAtBotMsg); len(res) != 0 {
		t.Errorf("reactions after the run = %+v, want none", res)
	}
	if added, removed := r.fake.ReactionCalls(); added != 1 || removed != 1 {
		t.Errorf("reactions added %d, removed %d; want 1 and 1", added, removed)
	}
}
