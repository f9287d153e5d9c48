package core_test

import (
	"context"
	"strings"
	"testing"

	"openbot/core"
	"openbot/store/bolt"
)

// TestRestartRecovery: a process died with queued items, a processing item in a
// running run, a delivered and a pending outbox entry. After a restart every queued
// item is processed exactly once, the running run is failed with a notice, and
// nothing is delivered twice.
func TestRestartRecovery(t *testing.T) {
	h := newHarness(t, core.Limits{})
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(core.Options{Store: st, Agent: h.agent, Bots: team})
	if err != nil {
		t.Fatal(err)
	}
	h.eng = eng
	// Without Run, Ingest stores and routes but nothing is picked.
	a := h.say("@engineer task A")                                                  // will be "processing" in a running run
	b := h.say("@qa task B", func(in *core.Inbound) { in.ThreadKey = "console:b" }) // stays queued
	c := h.say("@reviewer task C", func(in *core.Inbound) { in.ThreadKey = "console:c" })
	ctx := context.Background()
	err = st.Update(ctx, func(tx core.Tx) error {
		it, err := tx.NextQueued(core.BotActorID("engineer"), func(core.InboxItem) bool { return false })
		if err != nil {
			return err
		}
		run, err := tx.PutRun(core.Run{Bot: it.Actor, Thread: it.Thread, Status: core.RunRunning, Items: []core.ItemID{it.ID}, Triggers: []core.MessageID{it.Message}})
		if err != nil {
			return err
		}
		it.Status, it.Run = core.ItemProcessing, run.ID
		if _, err := tx.PutItem(it); err != nil {
			return err
		}
		// A run that was created but never started (queued) in thread C.
		if _, err := tx.PutRun(core.Run{Bot: core.BotActorID("reviewer"), Thread: c.Thread, Status: core.RunQueued}); err != nil {
			return err
		}
		// An earlier reply in thread C, already delivered, plus one still pending.
		if _, err := tx.PutOutbox(core.OutboxEntry{Account: "console/local", Conversation: "other", Thread: c.Thread, Message: c.Message, Status: core.OutboxDelivered, PlatformID: "old"}); err != nil {
			return err
		}
		_, err = tx.PutOutbox(core.OutboxEntry{Account: "console/local", Conversation: "other", Thread: c.Thread, Message: c.Message, Status: core.OutboxPending})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	h.start()
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 0 {
		t.Fatalf("engineer ran %d times; its interrupted run is failed, not rerun", n)
	}
	if len(h.agent.jobsFor("qa")) != 1 || len(h.agent.jobsFor("reviewer")) != 1 {
		t.Fatalf("queued items must be processed exactly once: qa %d, reviewer %d",
			len(h.agent.jobsFor("qa")), len(h.agent.jobsFor("reviewer")))
	}
	ms := h.messages(a.Thread)
	last := ms[len(ms)-1]
	if last.Kind != core.KindNotice || !strings.Contains(last.Text, "restarted") {
		t.Fatalf("thread A's last message = %+v, want a restart notice", last)
	}
	if n := len(h.runs(core.RunQueued)) + len(h.runs(core.RunRunning)); n != 0 {
		t.Fatalf("%d queued/running runs left after recovery", n)
	}
	noticeC := 0
	for _, m := range h.messages(c.Thread) {
		if m.Kind == core.KindNotice && strings.Contains(m.Text, "@reviewer") && strings.Contains(m.Text, "restarted") {
			noticeC++
		}
	}
	if noticeC != 1 {
		t.Fatalf("thread C has %d restart notices for the queued run, want 1", noticeC)
	}
	var got []string
	for _, d := range h.ad.deliveries() {
		got = append(got, string(d.Conversation)+":"+d.Text)
	}
	var pendingC, noticeA int
	for _, g := range got {
		if g == "other:@reviewer task C" {
			pendingC++
		}
		if strings.HasPrefix(g, "main:@engineer") && strings.Contains(g, "restarted") {
			noticeA++
		}
	}
	if pendingC != 1 || noticeA != 1 {
		t.Fatalf("deliveries %q: want the pending entry once, the delivered one not again, one notice", got)
	}
	_ = b

	// A second restart changes nothing and delivers nothing again.
	n := len(h.ad.deliveries())
	h.stop()
	h.start()
	h.idle()
	if m := len(h.ad.deliveries()); m != n {
		t.Fatalf("second restart delivered %d more messages", m-n)
	}
}
