package feishu_test

import (
	"fmt"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
)

// TestNamesCacheIsLRU: the sender-name cache holds at most MaxNames users and, when
// full, forgets the least recently seen one only, so a user seen recently is not
// looked up again after a burst of new senders.
func TestNamesCacheIsLRU(t *testing.T) {
	h := newHarness(t, nil)
	a := h.a
	if got := feishu.SenderName(a, t.Context(), feishutest.BobOpenID); got != "Bob" {
		t.Fatalf("Bob's name %q", got)
	}
	for i := range feishu.MaxNames - 1 {
		feishu.PutName(a, fmt.Sprintf("ou_burst%05d", i), "") // a burst of new senders
	}
	feishu.SenderName(a, t.Context(), feishutest.BobOpenID) // Bob is seen again
	feishu.SenderName(a, t.Context(), feishutest.AliceOpenID)
	if n := feishu.NamesLen(a); n != feishu.MaxNames {
		t.Fatalf("%d names cached, want %d", n, feishu.MaxNames)
	}
	feishu.SenderName(a, t.Context(), feishutest.BobOpenID)
	if n := len(h.srv.CallsTo("/open-apis/contact/v3/users/" + feishutest.BobOpenID)); n != 1 {
		t.Errorf("Bob looked up %d times, want 1: a recently seen name stays cached", n)
	}
	if feishu.CachedName(a, "ou_burst00000") {
		t.Error("the least recently seen sender is still cached")
	}
}

// TestPendingNewBounded: without a Cursors store a pending /new is remembered for
// at most MaxFresh conversations, the least recently marked forgotten first.
func TestPendingNewBounded(t *testing.T) {
	a := newHarness(t, nil).a
	ctx := t.Context()
	chat := func(i int) string { return fmt.Sprintf("oc_%05d", i) }
	for i := range feishu.MaxFresh + 10 {
		if err := feishu.SetPendingNew(a, ctx, chat(i), true); err != nil {
			t.Fatal(err)
		}
	}
	if n := feishu.FreshLen(a); n != feishu.MaxFresh {
		t.Fatalf("%d pending /new remembered, want %d", n, feishu.MaxFresh)
	}
	if feishu.PendingNew(a, ctx, chat(0)) {
		t.Error("the oldest pending /new is still remembered")
	}
	if !feishu.PendingNew(a, ctx, chat(feishu.MaxFresh+9)) {
		t.Error("the newest pending /new was forgotten")
	}
}
