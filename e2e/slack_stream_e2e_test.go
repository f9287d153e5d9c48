package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// startSlackStream runs the engine with a streaming whole-team Slack app (Events
// API) against the fake Slack, the agent running script, on clock.
func startSlackStream(t *testing.T, clock *stepClock, script streamScript) *slackRig {
	t.Helper()
	r := &slackRig{fake: slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})}
	t.Cleanup(r.fake.Close)
	r.proc = openProc(t, "", core.Options{Agent: &streamAgent{script: script}, Clock: clock})
	ad, err := slack.New(slack.Options{Name: "acme", Bot: "*", Mode: "http", BotToken: "xoxb-e2e", SigningSecret: slackSecret, DMPolicy: core.DMOpen,
		APIURL: r.fake.APIURL(), Bots: e2eTeam, Engine: r.eng, State: slack.StoreState(r.st), Streaming: true})
	if err != nil {
		t.Fatal(err)
	}
	r.run(ad)
	return r
}

// slackText is the text of every message the fake Slack holds, in order.
func slackTexts(f *slacktest.Server) []string {
	var out []string
	for _, m := range f.Messages() {
		out = append(out, m.Text)
	}
	return out
}

func TestSlackStreamEditsThrottled(t *testing.T) {
	clock := newStepClock()
	var r *slackRig
	r = startSlackStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("Hel")
		if err := firstPost(ctx, clock, "the first post", func() bool { return len(r.fake.CallsTo("chat.postMessage")) == 1 }); err != nil {
			return "", err
		}
		// The clock stands still: none of these may become an edit.
		for _, s := range []string{"Hello", "Hello w", "Hello wo", "Hello wor", "Hello worl"} {
			ts.StreamText(s)
		}
		ts.StreamWorking("shell")
		ts.StreamText("Hello world")
		err := until(ctx, clock, time.Second, "one edit", func() bool {
			return strings.Join(slackTexts(r.fake), "|") == "Hello world"
		})
		return "Hello world, *all* of it.", err
	})
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.idle()
	if n := len(r.fake.CallsTo("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage calls = %d, want 1", n)
	}
	if n := len(r.fake.CallsTo("chat.update")); n != 2 {
		t.Errorf("chat.update calls = %d, want 2 (one throttled edit, the final one)", n)
	}
	if got := slackTexts(r.fake); len(got) != 1 || got[0] != "Hello world, _all_ of it." {
		t.Errorf("messages = %q, want the one final reply", got)
	}
}

func TestSlackStreamRateLimitedEditsEndWithOneCompleteMessage(t *testing.T) {
	clock := newStepClock()
	var r *slackRig
	r = startSlackStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText("one")
		if err := firstPost(ctx, clock, "the first post", func() bool { return len(r.fake.CallsTo("chat.postMessage")) == 1 }); err != nil {
			return "", err
		}
		r.fake.FailNext("chat.update", http.StatusTooManyRequests, "ratelimited", time.Second)
		ts.StreamText("one two")
		if err := until(ctx, clock, time.Second, "a refused edit", func() bool { return len(r.fake.CallsTo("chat.update")) == 1 }); err != nil {
			return "", err
		}
		ts.StreamText("one two three")
		if err := until(ctx, clock, time.Second, "an edit after the wait", func() bool {
			return strings.Join(slackTexts(r.fake), "|") == "one two three"
		}); err != nil {
			return "", err
		}
		r.fake.FailNext("chat.update", http.StatusTooManyRequests, "ratelimited", time.Second) // the final edit
		return "one two three four.", nil
	})
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.idle()
	if n := len(r.fake.CallsTo("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage calls = %d, want 1", n)
	}
	if n := len(r.fake.CallsTo("chat.update")); n != 4 {
		t.Errorf("chat.update calls = %d, want 4 (refused, edit, refused final, final)", n)
	}
	if got := slackTexts(r.fake); len(got) != 1 || got[0] != "one two three four." {
		t.Errorf("messages = %q, want one complete reply", got)
	}
}

func TestSlackStreamLongReplyIntoSecondMessage(t *testing.T) {
	clock := newStepClock()
	long := strings.Repeat("word ", slack.MaxChunk/5+200)
	var r *slackRig
	r = startSlackStream(t, clock, func(ctx context.Context, ts core.TextStreamer) (string, error) {
		ts.StreamText(long[:100])
		if err := firstPost(ctx, clock, "the first post", func() bool { return len(r.fake.CallsTo("chat.postMessage")) == 1 }); err != nil {
			return "", err
		}
		ts.StreamText(long)
		if err := until(ctx, clock, time.Second, "a second message", func() bool { return len(r.fake.Messages()) == 2 }); err != nil {
			return "", err
		}
		return long + "end.", nil
	})
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.idle()
	if n := len(r.fake.CallsTo("chat.postMessage")); n != 2 {
		t.Errorf("chat.postMessage calls = %d, want 2", n)
	}
	got := slackTexts(r.fake)
	joined := strings.Join(strings.Fields(strings.Join(got, " ")), " ")
	if len(got) != 2 || joined != strings.TrimSpace(long+"end.") {
		t.Errorf("messages = %d, joined text ends %q", len(got), joined[max(0, len(joined)-20):])
	}
	for _, m := range r.fake.Messages() {
		if m.ThreadTS != "1767225600.000100" {
			t.Errorf("message %s outside the Slack thread (thread_ts %q)", m.TS, m.ThreadTS)
		}
	}
}
