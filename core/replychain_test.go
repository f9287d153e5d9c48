package core_test

import (
	"testing"

	"openbot/core"
)

// keyAdapter gives delivered messages a platform identity "tg:<platform id>".
type keyAdapter struct{ *recAdapter }

func (keyAdapter) MessageKey(_ core.ConversationRef, pid string) string { return "tg:" + pid }

// TestReplyChainJoinsOlderThread: a reply to a message of an older thread (a
// human's or a bot's delivered one) joins that thread, and the conversation's
// current thread stays what it was.
func TestReplyChainJoinsOlderThread(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.keyer = true
	h.start()
	old := h.say("first task", func(in *core.Inbound) { in.DedupKey = "tg:h1" })
	h.idle()
	cur := h.say("second task", func(in *core.Inbound) { in.NewThread = true })
	h.idle()
	if old.Thread == cur.Thread {
		t.Fatal("NewThread did not start a thread")
	}
	// Reply to the human's first message.
	r := h.say("more on the first", func(in *core.Inbound) { in.ReplyToKey = "tg:h1" })
	if r.Thread != old.Thread {
		t.Fatalf("reply to a human message went to thread %d, want %d", r.Thread, old.Thread)
	}
	h.idle()
	// Reply to the bot's delivered answer in the first thread (platform id p1).
	r = h.say("and this", func(in *core.Inbound) { in.ReplyToKey = "tg:p1" })
	if r.Thread != old.Thread {
		t.Fatalf("reply to a delivered bot message went to thread %d, want %d", r.Thread, old.Thread)
	}
	h.idle()
	// An unknown reply target, or no reply: the current thread.
	if r := h.say("unrelated", func(in *core.Inbound) { in.ReplyToKey = "tg:zzz" }); r.Thread != cur.Thread {
		t.Fatalf("reply to an unknown message went to %d, want the current thread %d", r.Thread, cur.Thread)
	}
	if r := h.say("plain"); r.Thread != cur.Thread {
		t.Fatalf("plain message went to %d, want the current thread %d", r.Thread, cur.Thread)
	}
	h.idle()
}
