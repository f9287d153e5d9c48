package telegram

import (
	"errors"
	"strings"
	"testing"

	"openbot/core"
)

func TestConversationRoundTrip(t *testing.T) {
	tests := []struct {
		c       Conversation
		ref     core.ConversationRef
		threadK string
	}{
		{Conversation{Chat: 100000001}, "100000001", "telegram:900:100000001"}, // private: per bot
		{Conversation{Chat: -1001000000001}, "-1001000000001", "telegram:-1001000000001"},
		{Conversation{Chat: -1001000000002, Topic: 42}, "-1001000000002:topic:42", "telegram:-1001000000002:topic:42"},
	}
	for _, tt := range tests {
		if got := tt.c.Ref(); got != tt.ref {
			t.Errorf("%+v.Ref() = %q, want %q", tt.c, got, tt.ref)
		}
		if got := tt.c.ThreadKey(900); got != tt.threadK {
			t.Errorf("%+v.ThreadKey() = %q, want %q", tt.c, got, tt.threadK)
		}
		back, err := ParseConversation(tt.ref)
		if err != nil || back != tt.c {
			t.Errorf("ParseConversation(%q) = %+v, %v; want %+v", tt.ref, back, err, tt.c)
		}
	}
}

func TestParseConversationRejects(t *testing.T) {
	for _, ref := range []core.ConversationRef{"", "0", "abc", "12:topic:", "12:topic:0", "12:topic:-3", "12:topic:x", ":topic:4", "T1:C1"} {
		if c, err := ParseConversation(ref); !errors.Is(err, ErrBadConversation) {
			t.Errorf("ParseConversation(%q) = %+v, %v; want ErrBadConversation", ref, c, err)
		}
	}
}

func TestKeys(t *testing.T) {
	if got, want := DedupKey(900, -1001000000001, 201), "telegram:-1001000000001:201"; got != want {
		t.Errorf("group DedupKey = %q, want %q (shared by every bot in the group)", got, want)
	}
	if got, want := DedupKey(900, 100000001, 15), "telegram:900:100000001:15"; got != want {
		t.Errorf("private DedupKey = %q, want %q (per bot)", got, want)
	}
	if DedupKey(900, 100000001, 15) == DedupKey(901, 100000001, 15) {
		t.Error("two bots' private chats with one person share a dedup key")
	}
	if got, want := HumanActor(100000002), core.ActorID("telegram:100000002"); got != want {
		t.Errorf("HumanActor = %q, want %q", got, want)
	}
	if got, want := AccountID("main"), core.AccountID("telegram/main"); got != want {
		t.Errorf("AccountID = %q, want %q", got, want)
	}
	if got, want := CursorName("main"), "telegram/main/offset"; got != want {
		t.Errorf("CursorName = %q, want %q", got, want)
	}
}

func TestCallbackData(t *testing.T) {
	for _, tt := range []struct {
		token  string
		choice int
		want   string
	}{
		{"abcdefghij23", 0, "q:abcdefghij23:0"},
		{"abcdefghij23", 1, "q:abcdefghij23:1"},
		{strings.Repeat("Z", 32), 9999, "q:" + strings.Repeat("Z", 32) + ":9999"},
	} {
		got, err := CallbackData(tt.token, tt.choice)
		if err != nil || got != tt.want || len(got) > MaxCallbackData {
			t.Errorf("CallbackData(%q, %d) = %q, %v; want %q", tt.token, tt.choice, got, err, tt.want)
		}
		tok, i, ok := ParseCallbackData(got)
		if !ok || tok != tt.token || i != tt.choice {
			t.Errorf("ParseCallbackData(%q) = %q, %d, %v", got, tok, i, ok)
		}
	}
	for _, bad := range []struct {
		token  string
		choice int
	}{{"", 0}, {strings.Repeat("a", 33), 0}, {"a:b", 0}, {"日本", 0}, {"ok", -1}, {"ok", 10000}} {
		if got, err := CallbackData(bad.token, bad.choice); !errors.Is(err, ErrBadCallback) {
			t.Errorf("CallbackData(%q, %d) = %q, %v; want ErrBadCallback", bad.token, bad.choice, got, err)
		}
	}
	for _, bad := range []string{"", "q:", "q:abc", "q:abc:", "q::1", "q:abc:-1", "q:abc:1x", "q:abc:+1",
		"q:abc:1:2", "approve:run-17", "x:abc:1", "q:ab c:1", "q:abc:12345", "q:" + strings.Repeat("a", 70) + ":1"} {
		if tok, i, ok := ParseCallbackData(bad); ok {
			t.Errorf("ParseCallbackData(%q) = %q, %d, true; want false", bad, tok, i)
		}
	}
}
