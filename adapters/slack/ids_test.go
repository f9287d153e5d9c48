package slack

import (
	"errors"
	"testing"

	"openbot/core"
)

func TestConversationRefRoundTrip(t *testing.T) {
	for _, c := range []Conversation{
		{Team: "T0TEST", Channel: "C0TEST001", ThreadTS: "1767225600.000100"},
		{Team: "T0TEST", Channel: "D0TEST001"},
		{Team: "T0TEST", Channel: "D0TEST001", ThreadTS: "1767225800.000400"},
	} {
		got, err := ParseConversation(c.Ref())
		if err != nil {
			t.Fatalf("ParseConversation(%q): %v", c.Ref(), err)
		}
		if got != c {
			t.Errorf("round trip of %q = %+v, want %+v", c.Ref(), got, c)
		}
	}
}

func TestParseConversationRejects(t *testing.T) {
	for _, ref := range []core.ConversationRef{"", "T0TEST", ":C1", "T1:", "T1:C1:", "T1:C1:1.2:x"} {
		if _, err := ParseConversation(ref); !errors.Is(err, ErrBadConversation) {
			t.Errorf("ParseConversation(%q) err = %v, want ErrBadConversation", ref, err)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name                string
		channel, ts, thread string
		dm                  bool
		wantKey             string
		wantRef             core.ConversationRef
	}{
		{"top-level channel mention", "C1", "100.1", "", false, "slack:T1:C1:100.1", "T1:C1:100.1"},
		{"reply in channel thread", "C1", "200.2", "100.1", false, "slack:T1:C1:100.1", "T1:C1:100.1"},
		{"dm", "D1", "300.3", "", true, "slack:T1:D1", "T1:D1"},
		{"thread inside dm", "D1", "400.4", "300.3", true, "slack:T1:D1:300.3", "T1:D1:300.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ThreadKey("T1", tt.channel, tt.ts, tt.thread, tt.dm); got != tt.wantKey {
				t.Errorf("ThreadKey = %q, want %q", got, tt.wantKey)
			}
			if got := ReplyConversation("T1", tt.channel, tt.ts, tt.thread, tt.dm).Ref(); got != tt.wantRef {
				t.Errorf("ReplyConversation = %q, want %q", got, tt.wantRef)
			}
		})
	}
	if got, want := DedupKey("T1", "C1", "100.1"), "slack:T1:C1:100.1"; got != want {
		t.Errorf("DedupKey = %q, want %q", got, want)
	}
	if got, want := HumanActor("T1", "U1"), core.ActorID("slack:T1:U1"); got != want {
		t.Errorf("HumanActor = %q, want %q", got, want)
	}
	if got, want := AccountID("acme"), core.AccountID("slack/acme"); got != want {
		t.Errorf("AccountID = %q, want %q", got, want)
	}
}
