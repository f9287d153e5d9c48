package slack

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

func delivery(text string) core.Delivery {
	return core.Delivery{
		Outbox: 7, Thread: 1, Message: 2,
		Conversation: "T0TEST:C0TEST001:1767225600.000100",
		Sender:       core.Sender{Actor: core.BotActorID("engineer"), Handle: "engineer", Name: "Engineer"},
		Text:         text,
	}
}

func TestDeliverPostsIntoThread(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Deliver(t.Context(), delivery("**Done**: see [PR](https://e.com/pr/1)"))
	if err != nil {
		t.Fatal(err)
	}
	calls := e.slack.CallsTo("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("%d posts, want 1", len(calls))
	}
	f := calls[0].Form
	if f.Get("channel") != "C0TEST001" || f.Get("thread_ts") != "1767225600.000100" || f.Get("text") != "*Done*: see <https://e.com/pr/1|PR>" {
		t.Errorf("post form %v", f)
	}
	if f.Get("username") != "" || f.Get("icon_emoji") != "" {
		t.Errorf("own bot must not override the name: %v", f)
	}
	if f.Get("token") != "" {
		t.Error("token recorded by the fake")
	}
	if id == "" || id != strings.TrimSpace(id) {
		t.Errorf("platform id %q", id)
	}
}

func TestDeliverDMTopLevel(t *testing.T) {
	e := newEnv(t, nil)
	d := delivery("hi")
	d.Conversation = "T0TEST:D0TEST001"
	if _, err := e.a.Deliver(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	f := e.slack.CallsTo("chat.postMessage")[0].Form
	if f.Get("channel") != "D0TEST001" || f.Has("thread_ts") {
		t.Errorf("dm post form %v", f)
	}
}

func TestDeliverStarAccountShowsBotName(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Bot = "*"; o.IconEmoji = map[string]string{"engineer": ":wrench:"} })
	if _, err := e.a.Deliver(t.Context(), delivery("hi")); err != nil {
		t.Fatal(err)
	}
	f := e.slack.CallsTo("chat.postMessage")[0].Form
	if f.Get("username") != "Engineer" || f.Get("icon_emoji") != ":wrench:" {
		t.Errorf("star post form %v", f)
	}
	// a named app posting for another bot (fallback) shows that bot's name too
	e = newEnv(t, func(o *Options) { o.Bot = "chief_of_staff" })
	if _, err := e.a.Deliver(t.Context(), delivery("hi")); err != nil {
		t.Fatal(err)
	}
	f = e.slack.CallsTo("chat.postMessage")[0].Form
	if f.Get("username") != "Engineer" || f.Get("icon_emoji") != ":robot_face:" {
		t.Errorf("fallback post form %v", f)
	}
}

// TestDeliverRateLimited: a 429 with Retry-After: 2 becomes a DeliveryError with
// RetryAfter 2s; the retried delivery posts once, so one reply and no duplicate.
func TestDeliverRateLimited(t *testing.T) {
	e := newEnv(t, nil)
	e.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "", 2*time.Second)
	_, err := e.a.Deliver(t.Context(), delivery("hello"))
	var de core.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a core.DeliveryError", err)
	}
	if de.RetryAfter() != 2*time.Second || de.Permanent() {
		t.Errorf("RetryAfter %v Permanent %v, want 2s false", de.RetryAfter(), de.Permanent())
	}
	if _, err := e.a.Deliver(t.Context(), delivery("hello")); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := len(e.slack.CallsTo("chat.postMessage")); n != 2 {
		t.Errorf("%d post attempts, want 2 (one refused, one posted)", n)
	}
}

func TestDeliverErrorMapping(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		permanent bool
	}{
		{200, "channel_not_found", true},
		{200, "not_in_channel", true},
		{200, "invalid_auth", true},
		{200, "account_inactive", true},
		{200, "msg_blocks_too_long", true},
		{200, "internal_error", false},
		{500, "", false},
		{503, "", false},
		{404, "", true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", c.status, c.code), func(t *testing.T) {
			e := newEnv(t, nil)
			e.slack.FailNext("chat.postMessage", c.status, c.code, 0)
			_, err := e.a.Deliver(t.Context(), delivery("x"))
			if err == nil {
				t.Fatal("no error")
			}
			var de core.DeliveryError
			if errors.As(err, &de) {
				if de.Permanent() != c.permanent || de.RetryAfter() != 0 {
					t.Errorf("Permanent %v RetryAfter %v, want %v 0", de.Permanent(), de.RetryAfter(), c.permanent)
				}
			} else if c.permanent {
				t.Errorf("err %v is not a DeliveryError, want permanent", err)
			}
		})
	}
}

func TestDeliverBadConversationIsPermanent(t *testing.T) {
	e := newEnv(t, nil)
	d := delivery("x")
	d.Conversation = "nonsense"
	_, err := e.a.Deliver(t.Context(), d)
	var de core.DeliveryError
	if !errors.As(err, &de) || !de.Permanent() || !errors.Is(err, ErrBadConversation) {
		t.Errorf("err = %v, want permanent ErrBadConversation", err)
	}
}

// TestDeliverLongReplySplitsAndResumes: a 9,000-character reply with a code block
// goes out as several messages in the thread, none cut inside the block, and a
// failure half-way does not repost the chunks already posted.
func TestDeliverLongReplySplitsAndResumes(t *testing.T) {
	e := newEnv(t, nil)
	var b strings.Builder
	for b.Len() < 3500 {
		b.WriteString("The migration test fails because the schema is stale. ")
	}
	b.WriteString("\n\n```go\n")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&b, "if err := step%d(); err != nil { return err }\n", i)
	}
	b.WriteString("```\n\n")
	for b.Len() < 9000 {
		b.WriteString("Re-run it on a fresh database and it passes. ")
	}
	text := b.String()

	e.slack.FailNext("chat.postMessage", 200, "internal_error", 0) // first attempt fails at once
	if _, err := e.a.Deliver(t.Context(), delivery(text)); err == nil {
		t.Fatal("want the scripted failure")
	}
	first, err := e.a.Deliver(t.Context(), delivery(text))
	if err != nil {
		t.Fatal(err)
	}
	posts := e.slack.CallsTo("chat.postMessage")[1:]
	if len(posts) < 3 {
		t.Fatalf("%d messages, want at least 3", len(posts))
	}
	var joined []string
	codeWhole := 0
	for i, p := range posts {
		txt := p.Form.Get("text")
		if p.Form.Get("thread_ts") != "1767225600.000100" {
			t.Errorf("chunk %d not in the thread", i)
		}
		if n := len([]rune(txt)); n > MaxChunk {
			t.Errorf("chunk %d has %d chars", i, n)
		}
		if strings.Count(txt, "```")%2 != 0 {
			t.Errorf("chunk %d cuts a code block", i)
		}
		if strings.Contains(txt, "step0()") && strings.Contains(txt, "step59()") {
			codeWhole++
		}
		joined = append(joined, txt)
	}
	if codeWhole != 1 {
		t.Errorf("code block whole in %d chunks, want 1", codeWhole)
	}
	if got, want := strings.Join(strings.Fields(strings.Join(joined, " ")), " "), strings.Join(strings.Fields(Format(text)), " "); got != want {
		t.Errorf("joined chunks differ from the formatted reply")
	}
	if first == "" {
		t.Error("no platform id")
	}

	// Now a 429 on the third chunk: the retry posts only chunks 3…n.
	e2 := newEnv(t, nil)
	e2.slack.FailAfter("chat.postMessage", 2, http.StatusTooManyRequests, "", time.Second)
	_, err = e2.a.Deliver(t.Context(), delivery(text))
	var de core.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter() != time.Second {
		t.Fatalf("err = %v, want a 1s rate limit", err)
	}
	again, err := e2.a.Deliver(t.Context(), delivery(text))
	if err != nil {
		t.Fatal(err)
	}
	calls := e2.slack.CallsTo("chat.postMessage")
	if len(calls) != len(posts)+1 {
		t.Errorf("%d post calls, want %d (each chunk once plus the refused one)", len(calls), len(posts)+1)
	}
	var texts []string
	for i, c := range calls {
		if i != 2 { // the refused call
			texts = append(texts, c.Form.Get("text"))
		}
	}
	if strings.Join(texts, "\x00") != strings.Join(joined, "\x00") {
		t.Error("resumed delivery posted different chunks")
	}
	if again != "1767300000.000001" {
		t.Errorf("resumed delivery id %q, want the first chunk's ts", again)
	}
}
