package core_test

import (
	"testing"

	"openbot/core"
)

// TestQuietThreads: once two people talk in a thread, an unaddressed message
// wakes no bot; a mention still does; with one person the default bot answers;
// an account with reply_to_unaddressed: always keeps answering.
func TestQuietThreads(t *testing.T) {
	other := func(in *core.Inbound) { in.SenderID, in.SenderName = "console:other", "other" }
	for _, always := range []bool{false, true} {
		h := newHarness(t, core.Limits{})
		if always {
			h.opts = func(o *core.Options) { o.AlwaysReply = []core.AccountID{"console/local"} }
		}
		h.start()
		h.say("hello team") // one person: the default bot answers
		h.idle()
		if n := len(h.agent.jobsFor("chief_of_staff")); n != 1 {
			t.Fatalf("always=%v: one person, unaddressed: %d runs, want 1", always, n)
		}
		h.say("I think we should wait", other)
		h.idle()
		h.say("agreed, let's wait")
		h.idle()
		want := 1
		if always {
			want = 3
		}
		if n := len(h.agent.jobsFor("chief_of_staff")); n != want {
			t.Errorf("always=%v: two people, unaddressed: %d runs in all, want %d", always, n, want)
		}
		h.say("@chief_of_staff what do you think?", other)
		h.idle()
		if n := len(h.agent.jobsFor("chief_of_staff")); n != want+1 {
			t.Errorf("always=%v: a mention: %d runs in all, want %d", always, n, want+1)
		}
		h.stop()
	}
}
