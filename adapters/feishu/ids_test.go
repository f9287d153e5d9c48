package feishu

import (
	"errors"
	"testing"

	"openbot/core"
)

func TestConversationRoundTrip(t *testing.T) {
	for _, c := range []Conversation{
		{Chat: "oc_5fc90c2dcb8cb0a515bc34c4552b2895", Root: "om_d0b6b951d313294318002dfa2c33f529"},
		{Chat: "oc_ca92fff76249e5680de3669b4880557c"},
	} {
		got, err := ParseConversation(c.Ref())
		if err != nil || got != c {
			t.Errorf("ParseConversation(%q) = %+v, %v; want %+v", c.Ref(), got, err, c)
		}
	}
}

func TestParseConversationRejects(t *testing.T) {
	for _, ref := range []core.ConversationRef{"", ":", "oc_1:", ":om_1", "a:b:c"} {
		if _, err := ParseConversation(ref); !errors.Is(err, ErrBadConversation) {
			t.Errorf("ParseConversation(%q) error = %v, want ErrBadConversation", ref, err)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct{ got, want string }{
		{DedupKey("om_1"), "feishu:om_1"},
		{ThreadKey("oc_1", "om_2", ""), "feishu:oc_1:om_2"},
		{ThreadKey("oc_1", "om_2", "om_1"), "feishu:oc_1:om_1"},
		{DialogKey("oc_9"), "feishu:oc_9"},
		{string(ActorID("ou_1")), "feishu:ou_1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
