package feishu_test

import (
	"context"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// TestDirectConversation: one line goes to the person by open_id, and the p2p
// chat in Feishu's answer is the conversation and its dialog key; an id that is
// not a Feishu user sends nothing.
func TestDirectConversation(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	ref, key, err := h.a.DirectConversation(ctx, feishu.ActorID(feishutest.BobOpenID), "hello")
	chat := feishutest.P2PChatOf(feishutest.BobOpenID)
	if err != nil || ref != core.ConversationRef(chat) || key != feishu.DialogKey(chat) {
		t.Fatalf("DirectConversation = %q %q %v, want the p2p chat %s", ref, key, err, chat)
	}
	for _, actor := range []core.ActorID{"telegram:1001", "feishu:oc_notaperson"} {
		if _, _, err := h.a.DirectConversation(ctx, actor, "hello"); err == nil || !strings.Contains(err.Error(), "not a Feishu user") {
			t.Errorf("%s: %v, want a refusal", actor, err)
		}
	}
	msgs := h.srv.Messages()
	if len(msgs) != 1 || msgs[0].IDType != "open_id" || msgs[0].ReceiveID != feishutest.BobOpenID || msgs[0].Text() != "hello" {
		t.Fatalf("sent %+v, want the hello line to Bob by open_id", msgs)
	}
}
