package core_test

import (
	"context"
	"testing"
	"time"

	"openbot/core"
)

// After retention has pruned an idle thread's messages, a reply to one of them
// and a redelivery of one are taken without error: the reply joins the thread by
// its key, the redelivery is a duplicate.
func TestIngestAfterIdleThreadPruned(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	first := h.say("hello team")
	h.idle()
	// Delete the thread's messages as idle-thread retention does, keeping the
	// dedup keys (as between two prune passes).
	for more := true; more; {
		var err error
		_, more, err = h.store.Prune(context.Background(), core.PruneIdleMessages, time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
	}
	if ms := h.messages(first.Thread); len(ms) != 0 {
		t.Fatalf("%d messages left", len(ms))
	}
	res := h.say("a reply to the old message", func(in *core.Inbound) { in.ReplyToKey = "console:1" })
	if res.Thread != first.Thread || res.Duplicate {
		t.Errorf("reply: %+v, want a new message in thread %d", res, first.Thread)
	}
	dup, err := h.eng.Ingest(context.Background(), core.Inbound{Account: "console/local", Platform: "console",
		DedupKey: "console:1", ThreadKey: "console:main", Conversation: "main", SenderID: "console:you", Text: "hello team", StartThread: true})
	if err != nil || !dup.Duplicate {
		t.Errorf("redelivery of a pruned message: %+v, %v; want a duplicate", dup, err)
	}
	h.idle()
}
