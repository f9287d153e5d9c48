package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

const tgStreamToken = "tok-chief"

type tgStreamRig struct{ *tgRig }

// startTelegramStream runs the engine with one streaming Telegram account of
// chief_of_staff (polling) against the fake Bot API, the agent running script.
func startTelegramStream(t *testing.T, clock *stepClock, script streamScript) *tgStreamRig {
	t.Helper()
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddBot(telegramtest.Bot{Token: tgStreamToken, ID: 900, Username: "chief_bot"})
	return &tgStreamRig{startTelegramWith(t, fake, "", core.Options{Agent: &streamAgent{script: script}, Clock: clock}, nil,
		telegram.Options{Name: "chief", Bot: "chief_of_staff", Token: tgStreamToken, Streaming: true})}
}

// ask sends a private message to the bot and waits until the run is over.
func (r *tgStreamRig) ask(t *testing.T) {
	t.Helper()
	up := fmt.Sprintf(`{"update_id":1,"message":{"message_id":11,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"first_name":"Alice","type":"private"},"date":1767225660,"text":"how are things?"}}`)
	if _, err := r.fake.PushUpdate(tgStreamToken, []byte(up)); err != nil {
		t.Fatal(err)
	}
	if err := r.fake.WaitConfirmed(r.ctx(), tgStreamToken, 2); err != nil {
		t.Fatal(err)
	}
	r.idle()
}

func (r *tgStreamRig) texts() []string {
	var out []string
	for _, m := range r.fake.Messages(tgStreamToken) {
		out = append(out, m.Text)
	}
	return out
}

func (r *tgStreamRig) count(method string) int { return len(r.fake.Calls(method)) }

func TestTelegramStreamEditsThrottled(t *testing.T) {
	clock := newStepClock()
	var r *tgStreamRig
	r = startTelegramStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("Hel")
		if err := firstPost(ctx, clock, "the first message", func() bool { return r.count("sendMessage") == 1 }); err != nil {
			return "", err
		}
		for _, s := range []string{"Hello", "Hello w", "Hello wo", "Hello wor", "Hello worl"} {
			ts.StreamText(s)
		}
		ts.StreamWorking("shell")
		ts.StreamText("Hello world")
		err := until(ctx, clock, time.Second, "one edit", func() bool { return strings.Join(r.texts(), "|") == "Hello world" })
		return "Hello world, *all* of it.", err
	})
	r.ask(t)
	if n := r.count("sendMessage"); n != 1 {
		t.Errorf("sendMessage calls = %d, want 1", n)
	}
	if n := r.count("editMessageText"); n != 2 {
		t.Errorf("editMessageText calls = %d, want 2 (one throttled edit, the final one)", n)
	}
	if got, want := r.texts(), telegram.Format("Hello world, *all* of it."); len(got) != 1 || got[0] != want {
		t.Errorf("messages = %q, want the one final reply %q", got, want)
	}
	// The reply's delivery records the streamed message as its platform message,
	// so a reply to it finds the thread (core.MessageKeyer).
	var delivered []string
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error {
		for i := core.OutboxID(1); i < 20; i++ {
			if o, err := tx.Outbox(i); err == nil && o.Op == core.OpMessage {
				delivered = append(delivered, string(o.Status)+" "+o.PlatformID)
			}
		}
		return nil
	})
	if ms := r.fake.Messages(tgStreamToken); len(ms) != 1 || len(delivered) != 1 || delivered[0] != fmt.Sprintf("%s %d", core.OutboxDelivered, ms[0].ID) {
		t.Errorf("outbox = %q, want the reply delivered as the streamed message", delivered)
	}
}

func TestTelegramStreamRateLimitedEditsEndWithOneCompleteMessage(t *testing.T) {
	clock := newStepClock()
	var r *tgStreamRig
	r = startTelegramStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("one")
		if err := firstPost(ctx, clock, "the first message", func() bool { return r.count("sendMessage") == 1 }); err != nil {
			return "", err
		}
		r.fake.Fail("editMessageText", telegramtest.RateLimited(1))
		ts.StreamText("one two")
		if err := until(ctx, clock, time.Second, "a refused edit", func() bool { return r.count("editMessageText") == 1 }); err != nil {
			return "", err
		}
		ts.StreamText("one two three")
		if err := until(ctx, clock, time.Second, "an edit after the wait", func() bool {
			return strings.Join(r.texts(), "|") == "one two three"
		}); err != nil {
			return "", err
		}
		r.fake.Fail("editMessageText", telegramtest.RateLimited(1)) // the final edit
		return "one two three four.", nil
	})
	r.ask(t)
	if n := r.count("sendMessage"); n != 1 {
		t.Errorf("sendMessage calls = %d, want 1", n)
	}
	if n := r.count("editMessageText"); n != 4 {
		t.Errorf("editMessageText calls = %d, want 4 (refused, edit, refused final, final)", n)
	}
	if got := r.texts(); len(got) != 1 || got[0] != "one two three four." {
		t.Errorf("messages = %q, want one complete reply", got)
	}
}

func TestTelegramStreamLongReplyIntoSecondMessage(t *testing.T) {
	clock := newStepClock()
	long := strings.Repeat("word ", telegram.MaxMessageLen/5+200)
	var r *tgStreamRig
	r = startTelegramStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText(long[:100])
		if err := firstPost(ctx, clock, "the first message", func() bool { return r.count("sendMessage") == 1 }); err != nil {
			return "", err
		}
		ts.StreamText(long)
		if err := until(ctx, clock, time.Second, "a second message", func() bool { return len(r.texts()) == 2 }); err != nil {
			return "", err
		}
		return long + "end.", nil
	})
	r.ask(t)
	if n := r.count("sendMessage"); n != 2 {
		t.Errorf("sendMessage calls = %d, want 2", n)
	}
	got := r.texts()
	joined := strings.Join(strings.Fields(strings.Join(got, " ")), " ")
	if len(got) != 2 || joined != strings.TrimSpace(long+"end.") {
		t.Errorf("messages = %d, joined text ends %q", len(got), joined[max(0, len(joined)-20):])
	}
}
