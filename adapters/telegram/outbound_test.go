package telegram

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

func delivery(conv core.ConversationRef, replyTo, text string) core.Delivery {
	return core.Delivery{
		Outbox: 1, Thread: 1, Message: 2, Conversation: conv, ReplyTo: replyTo,
		Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer", Name: "Engineer"},
		Text:   text,
	}
}

func TestDeliverForumTopicReply(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	id, err := a.Deliver(context.Background(), delivery("-1001000000002:topic:42", "43", "Draft **ready**: 3 features & 5 fixes."))
	if err != nil {
		t.Fatal(err)
	}
	p := e.topicReply(t)
	if p["text"] != "Draft <b>ready</b>: 3 features &amp; 5 fixes." {
		t.Errorf("text %q", p["text"])
	}
	if id != "1000" {
		t.Errorf("platform id %q, want the sent message_id 1000", id)
	}
}

func TestDeliverPrivateChatHasNoTopic(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	if _, err := a.Deliver(context.Background(), delivery("100000001", "", "hi")); err != nil {
		t.Fatal(err)
	}
	p := e.srv.Calls("sendMessage")[0].Params
	if _, ok := p["message_thread_id"]; ok {
		t.Errorf("message_thread_id sent to a private chat: %v", p)
	}
	if _, ok := p["reply_parameters"]; ok {
		t.Errorf("reply_parameters without ReplyTo: %v", p)
	}
}

func TestDeliverNamePrefix(t *testing.T) {
	tests := []struct {
		bot, sender, want string
	}{
		{"*", "engineer", "<b>Engineer</b>\nhello"},
		{"engineer", "engineer", "hello"},
		{"writer", "engineer", "<b>Engineer</b>\nhello"}, // another bot routed through this account
	}
	for _, tt := range tests {
		e := newEnv(t)
		o := e.options()
		o.Bot = tt.bot
		a := e.adapter(t, o)
		d := delivery("100000001", "", "hello")
		d.Sender.Handle = tt.sender
		if _, err := a.Deliver(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := e.srv.Calls("sendMessage")[0].Params["text"]; got != tt.want {
			t.Errorf("account %q, sender %q: text %q, want %q", tt.bot, tt.sender, got, tt.want)
		}
	}
}

func TestDeliverLongReply(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	md := longReply(10000)
	if _, err := a.Deliver(context.Background(), delivery("-1001000000001", "201", md)); err != nil {
		t.Fatal(err)
	}
	calls := e.srv.Calls("sendMessage")
	if len(calls) < 3 {
		t.Fatalf("%d messages for a 10,000-character reply", len(calls))
	}
	var joined strings.Builder
	for i, c := range calls {
		text := c.Params["text"]
		if n := UTF16Len(text); n > MaxMessageLen {
			t.Errorf("message %d is %d UTF-16 units", i, n)
		}
		assertBalanced(t, text)
		joined.WriteString(PlainText(text))
		if rt := telegramtest.ParseReplyTo(c); (i == 0) != (rt == 201) {
			t.Errorf("message %d replies to %d; only the first replies to 201", i, rt)
		}
	}
	if joined.String() != PlainText(Format(md)) {
		t.Error("joined messages differ from the formatted reply")
	}
}

func TestDeliverCantParseEntities(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	e.srv.Fail("sendMessage", telegramtest.ErrCantParse)
	if _, err := a.Deliver(context.Background(), delivery("100000001", "10", "**a** < b")); err != nil {
		t.Fatal(err)
	}
	calls := e.srv.Calls("sendMessage")
	if len(calls) != 2 {
		t.Fatalf("%d calls, want HTML then plain text", len(calls))
	}
	if p := calls[1].Params; p["parse_mode"] != "" || p["text"] != "a < b" || telegramtest.ParseReplyTo(calls[1]) != 10 {
		t.Errorf("resend %v; want plain text \"a < b\" replying to 10", p)
	}

	// Failing again: no third try, and the error is permanent.
	e2 := newEnv(t)
	a2 := e2.adapter(t, e2.options())
	e2.srv.Fail("sendMessage", telegramtest.ErrCantParse, telegramtest.ErrCantParse)
	_, err := a2.Deliver(context.Background(), delivery("100000001", "", "x"))
	var de core.DeliveryError
	if !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("err %v; want a permanent DeliveryError", err)
	}
	if n := len(e2.srv.Calls("sendMessage")); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

func TestDeliverErrors(t *testing.T) {
	tests := []struct {
		name       string
		fail       telegramtest.Error
		permanent  bool
		retryAfter time.Duration
	}{
		{"rate limited", telegramtest.RateLimited(3), false, 3 * time.Second},
		{"chat not found", telegramtest.ErrChatMissing, true, 0},
		{"blocked", telegramtest.ErrBlocked, true, 0},
		{"server error", telegramtest.Error{Code: 502, Description: "Bad Gateway"}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.adapter(t, e.options())
			e.srv.Fail("sendMessage", tt.fail)
			_, err := a.Deliver(context.Background(), delivery("100000001", "", "hi"))
			var de core.DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("err %v is not a core.DeliveryError", err)
			}
			if de.Permanent() != tt.permanent || de.RetryAfter() != tt.retryAfter {
				t.Errorf("permanent %v retryAfter %v; want %v %v", de.Permanent(), de.RetryAfter(), tt.permanent, tt.retryAfter)
			}
			if strings.Contains(err.Error(), botToken) {
				t.Errorf("error leaks the token: %v", err)
			}
		})
	}
}

func TestDeliverBadConversation(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	_, err := a.Deliver(context.Background(), delivery("T1:C1", "", "hi"))
	var de core.DeliveryError
	if !errors.Is(err, ErrBadConversation) || !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("err %v; want permanent ErrBadConversation", err)
	}
}

// TestDeliverRetryDoesNotRepeatParts: a 429 on the second part of a split reply;
// the lane's retry sends only the parts not yet sent.
func TestDeliverRetryDoesNotRepeatParts(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	var md strings.Builder
	for i := range 1700 {
		fmt.Fprintf(&md, "w%04d ", i) // about 10,200 units: three distinct parts
	}
	d := delivery("100000001", "", md.String())
	e.srv.FailAfter("sendMessage", 1, telegramtest.RateLimited(1))
	if _, err := a.Deliver(context.Background(), d); err == nil {
		t.Fatal("want the 429 error")
	}
	id, err := a.Deliver(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	calls := e.srv.Calls("sendMessage")
	if len(calls) != 4 {
		t.Fatalf("%d sendMessage calls, want 4: part 1, part 2 (429), part 2, part 3", len(calls))
	}
	if calls[1].Params["text"] != calls[2].Params["text"] || calls[0].Params["text"] == calls[2].Params["text"] {
		t.Error("the retry did not resume at the failed part")
	}
	if id != "1000" {
		t.Errorf("platform id %q, want the first part's 1000", id)
	}
}

func TestTransportErrorHidesToken(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	o.APIEndpoint = "http://127.0.0.1:1"
	a := e.adapter(t, o)
	_, err := a.Deliver(context.Background(), delivery("100000001", "", "hi"))
	if err == nil {
		t.Fatal("delivery to a closed port succeeded")
	}
	if strings.Contains(err.Error(), botToken) {
		t.Errorf("error leaks the token: %v", err)
	}
}
