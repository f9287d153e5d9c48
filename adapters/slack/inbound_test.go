package slack

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

func TestAppMentionStartsThreadAtItsTS(t *testing.T) {
	e := newEnv(t, nil)
	e.postEvent(t, "events_api_app_mention_channel.json")
	got := e.engine.ins.All()
	if len(got) != 1 {
		t.Fatalf("got %d inbounds, want 1", len(got))
	}
	want := core.Inbound{
		Account:      "slack/acme",
		Platform:     "slack",
		DedupKey:     "slack:T0TEST:C0TEST001:1767225600.000100",
		ThreadKey:    "slack:T0TEST:C0TEST001:1767225600.000100",
		Conversation: "T0TEST:C0TEST001:1767225600.000100",
		PlatformID:   "1767225600.000100",
		SenderID:     "slack:T0TEST:U0TEST001",
		SenderName:   "Alice",
		Text:         "@engineer can you review the failing build on main?",
		Mentions:     []string{"engineer"},
		StartThread:  true,
		DefaultBot:   "engineer",
		Received:     time.Unix(1767225600, 100000).UTC(),
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("inbound\n got %+v\nwant %+v", got[0], want)
	}
}

func TestTwinAndRetriesShareDedupKey(t *testing.T) {
	e := newEnv(t, nil)
	e.postEvent(t, "events_api_app_mention_channel.json")
	e.postEvent(t, "events_api_message_channel_twin_of_mention.json")

	var retry struct {
		Headers map[string]string `json:"headers"`
		RawBody string            `json:"raw_body"`
	}
	unmarshal(t, fixture(t, "http_retry_delivery.json"), &retry)
	rec := e.post(t, "/slack/acme/events", []byte(retry.RawBody), map[string]string{
		"X-Slack-Retry-Num": retry.Headers["X-Slack-Retry-Num"], "X-Slack-Retry-Reason": retry.Headers["X-Slack-Retry-Reason"],
	})
	if rec.Code != 200 {
		t.Fatalf("retry: status %d", rec.Code)
	}
	got := e.engine.ins.All()
	if len(got) != 3 {
		t.Fatalf("got %d inbounds, want 3", len(got))
	}
	for i, in := range got {
		if in.DedupKey != got[0].DedupKey || in.ThreadKey != got[0].ThreadKey || in.Text != got[0].Text {
			t.Errorf("inbound %d = %q/%q/%q, want the same as the first %q/%q/%q", i,
				in.DedupKey, in.ThreadKey, in.Text, got[0].DedupKey, got[0].ThreadKey, got[0].Text)
		}
	}
}

func TestNoIngestForBotsEditsJoins(t *testing.T) {
	for _, name := range []string{
		"events_api_bot_message_subtype.json",
		"events_api_message_from_own_bot.json",
		"events_api_message_changed.json",
		"events_api_channel_join.json",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.postEvent(t, name)
			if got := e.engine.ins.All(); len(got) != 0 {
				t.Errorf("got %d inbounds, want none: %+v", len(got), got)
			}
		})
	}
}

func TestThreadReplies(t *testing.T) {
	e := newEnv(t, nil)
	e.postEvent(t, "events_api_message_thread_reply.json")
	e.postEvent(t, "events_api_app_mention_in_thread.json")
	got := e.engine.ins.All()
	if len(got) != 2 {
		t.Fatalf("got %d inbounds, want 2", len(got))
	}
	root := "slack:T0TEST:C0TEST001:1767225600.000100"
	for i, in := range got {
		if in.ThreadKey != root || in.Conversation != "T0TEST:C0TEST001:1767225600.000100" {
			t.Errorf("inbound %d thread %q conv %q, want root %q", i, in.ThreadKey, in.Conversation, root)
		}
	}
	if got[0].StartThread || len(got[0].Mentions) != 0 {
		t.Errorf("unmentioned reply: StartThread %v Mentions %v, want false, none", got[0].StartThread, got[0].Mentions)
	}
	if got[0].DedupKey != "slack:T0TEST:C0TEST001:1767225660.000200" {
		t.Errorf("reply dedup key %q", got[0].DedupKey)
	}
	if !got[1].StartThread || got[1].SenderName != "Bob Example" {
		t.Errorf("mention in thread: StartThread %v sender %q", got[1].StartThread, got[1].SenderName)
	}
}

func TestDMIsOneThread(t *testing.T) {
	e := newEnv(t, nil)
	e.postEvent(t, "events_api_message_im.json")
	got := e.engine.ins.All()
	if len(got) != 1 {
		t.Fatalf("got %d inbounds, want 1", len(got))
	}
	in := got[0]
	if in.ThreadKey != "slack:T0TEST:D0TEST001" || in.Conversation != "T0TEST:D0TEST001" || !in.StartThread || in.DefaultBot != "engineer" {
		t.Errorf("dm inbound %+v", in)
	}
}

func TestStarAccountMentionMeansDefaultBot(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Bot = "*" })
	e.postEvent(t, "events_api_app_mention_channel.json")
	in := e.engine.ins.All()[0]
	if !reflect.DeepEqual(in.Mentions, []string{"*"}) || in.Text != "can you review the failing build on main?" || in.DefaultBot != "" {
		t.Errorf("star inbound mentions %v text %q default %q", in.Mentions, in.Text, in.DefaultBot)
	}
}

func TestNormalizeStarKeepsLines(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Bot = "*" })
	got, self, _ := e.a.normalize(t.Context(), "<@U0TESTBOT> please\n\n- a\n- hey <@U0TESTBOT> b", "U0TESTBOT")
	if want := "please\n\n- a\n- hey b"; got != want || !self {
		t.Errorf("normalize = %q, %v; want %q, true", got, self, want)
	}
}

func TestNormalize(t *testing.T) {
	e := newEnv(t, nil)
	e.slack.AddUser(slacktestBot("U0OTHERBOT", "chief_of_staff"))
	tests := []struct {
		in, want     string
		self, humans bool
	}{
		{"<@U0TESTBOT> hi", "@engineer hi", true, false},
		{"ask <@U0TEST002|bob> and <@U0TEST001>", "ask @Bob Example and @Alice", false, true},
		{"<@U0OTHERBOT> plan it", "@chief_of_staff plan it", false, false},
		{"<@U0NOBODY> hi", "@U0NOBODY hi", false, true},
		{"see <#C0TEST001|eng-builds> <!here> <!subteam^S1|@devs>", "see #eng-builds @here @devs", false, false},
		{"<https://e.com/a?b=1&amp;c=2|the docs> <https://e.com>", "[the docs](https://e.com/a?b=1&c=2) https://e.com", false, false},
		{"a &lt; b &amp;&amp; c &gt; d", "a < b && c > d", false, false},
	}
	for _, tt := range tests {
		got, self, humans := e.a.normalize(t.Context(), tt.in, "U0TESTBOT")
		if got != tt.want || self != tt.self || humans != tt.humans {
			t.Errorf("normalize(%q) = %q, %v, %v; want %q, %v, %v", tt.in, got, self, humans, tt.want, tt.self, tt.humans)
		}
	}
	if n := len(e.slack.CallsTo("users.info")); n != 4 {
		t.Errorf("users.info called %d times, want 4 (cached per user)", n)
	}
}

func TestTextHandleStartsThread(t *testing.T) {
	e := newEnv(t, nil)
	body := strings.Replace(string(fixture(t, "events_api_message_channel_twin_of_mention.json")),
		"<@U0TESTBOT> can you", "@chief_of_staff can you", 1)
	e.post(t, "/slack/acme/events", []byte(body), nil)
	body = strings.Replace(body, "@chief_of_staff can you", "@nobody can you", 1)
	body = strings.Replace(body, "1767225600.000100", "1767225601.000100", 2)
	e.post(t, "/slack/acme/events", []byte(body), nil)
	got := e.engine.ins.All()
	if len(got) != 1 {
		t.Fatalf("got %d inbounds, want 1 (the unknown @handle starts nothing)", len(got))
	}
	if !got[0].StartThread || len(got[0].Mentions) != 0 || got[0].Text != "@chief_of_staff can you review the failing build on main?" {
		t.Errorf("@handle inbound %+v", got[0])
	}
}

// TestTopLevelPostWithoutMention: a channel post that mentions no bot cannot belong
// to a known thread, so it is not ingested and costs no users.info call.
func TestTopLevelPostWithoutMention(t *testing.T) {
	e := newEnv(t, nil)
	body := strings.Replace(string(fixture(t, "events_api_message_channel_twin_of_mention.json")),
		"<@U0TESTBOT> can you", "@nobody can you", 1)
	e.post(t, "/slack/acme/events", []byte(body), nil)
	if got := e.engine.ins.All(); len(got) != 0 {
		t.Errorf("ingested %+v", got)
	}
	if n := len(e.slack.CallsTo("users.info")); n != 0 {
		t.Errorf("%d users.info calls for an ignored post", n)
	}
}

func TestMentionsHumans(t *testing.T) {
	e := newEnv(t, nil)
	body := string(fixture(t, "events_api_message_thread_reply.json"))
	e.post(t, "/slack/acme/events", []byte(strings.Replace(body, "also check", "<@U0TEST002> also check", 1)), nil)
	body = strings.Replace(body, "1767225660.000200", "1767225661.000200", 2)
	e.post(t, "/slack/acme/events", []byte(strings.Replace(body, "also check", "<@U0TEST002> @engineer also check", 1)), nil)
	got := e.engine.ins.All()
	if len(got) != 2 {
		t.Fatalf("got %d inbounds", len(got))
	}
	if !got[0].MentionsHumans || got[0].Text != "@Bob Example also check the flaky integration job please" {
		t.Errorf("human-only mention: %+v", got[0])
	}
	if got[1].MentionsHumans {
		t.Errorf("a bot is mentioned too, MentionsHumans must be false: %+v", got[1])
	}
}

func TestAllowLists(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.AllowUsers = []string{"U0TEST002"} })
	e.postEvent(t, "events_api_app_mention_channel.json") // from U0TEST001
	e.postEvent(t, "events_api_app_mention_in_thread.json")
	if got := e.engine.ins.All(); len(got) != 1 || got[0].SenderID != "slack:T0TEST:U0TEST002" {
		t.Errorf("allow_users: got %+v", got)
	}
	e = newEnv(t, func(o *Options) { o.AllowChannels = []string{"C0OTHER"} })
	e.postEvent(t, "events_api_app_mention_channel.json")
	if got := e.engine.ins.All(); len(got) != 0 {
		t.Errorf("allow_channels: got %+v", got)
	}
}

func TestTSTime(t *testing.T) {
	if got, want := tsTime("1767225600.000100"), time.Unix(1767225600, 100000).UTC(); !got.Equal(want) {
		t.Errorf("tsTime = %v, want %v", got, want)
	}
	if !tsTime("x").IsZero() {
		t.Error("tsTime(x) not zero")
	}
}
