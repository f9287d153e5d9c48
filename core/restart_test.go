package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// TestRestartRecovery: a process died with queued items, a processing item in a
// running run that died before its first step as often as allowed
// (MaxRestartsBeforeFirstStep), a delivered and a pending outbox entry. After a
// restart every queued item is processed exactly once, the running run is
// failed with a notice, and nothing is delivered twice.
func TestRestartRecovery(t *testing.T) {
	h := newHarness(t, core.Limits{})
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: h.agent, Bots: team})
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
		// Started again from the beginning as often as allowed already.
		run, err := tx.PutRun(core.Run{Bot: it.Actor, Thread: it.Thread, Status: core.RunRunning, Items: []core.ItemID{it.ID}, Triggers: []core.MessageID{it.Message},
			Restarts: core.MaxRestartsBeforeFirstStep})
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

// leftRunning stands for a process that died mid-run: it ingests "@engineer
// task A" without running the engine, stores a running run of it (with
// checkpoint, if any) that took the item processing, and closes the store.
func leftRunning(t *testing.T, h *harness, checkpoint []byte) (a core.IngestResult, runID core.RunID, itemID core.ItemID) {
	t.Helper()
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: h.agent, Bots: team})
	if err != nil {
		t.Fatal(err)
	}
	h.eng = eng
	a = h.say("@engineer task A")
	err = st.Update(context.Background(), func(tx core.Tx) error {
		it, err := tx.NextQueued(core.BotActorID("engineer"), func(core.InboxItem) bool { return false })
		if err != nil {
			return err
		}
		run, err := tx.PutRun(core.Run{Bot: it.Actor, Thread: it.Thread, Status: core.RunRunning, Items: []core.ItemID{it.ID},
			Triggers: []core.MessageID{it.Message}, Checkpoint: checkpoint})
		if err != nil {
			return err
		}
		runID, itemID = run.ID, it.ID
		it.Status, it.Run = core.ItemProcessing, run.ID
		_, err = tx.PutItem(it)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return a, runID, itemID
}

// TestRestartResumesRunWithCheckpoint: a running run that has a step checkpoint
// is resumed at the next start under the same run id (Job.Restart, the
// checkpoint and its triggers), not failed; its processing item ends done, the
// reply is posted once and no restart notice appears. A second time, when
// a shutdown stops the resumed run leaves it to the start after.
func TestRestartResumesRunWithCheckpoint(t *testing.T) {
	h := newHarness(t, core.Limits{})
	a, runID, itemID := leftRunning(t, h, []byte(`{"version":3}`))
	h.agent.reply["engineer"] = func(_ context.Context, j *core.Job) (string, error) {
		if !j.Restart || j.Run.ID != runID || string(j.Run.Checkpoint) != `{"version":3}` || len(j.Triggers) != 1 {
			return "", fmt.Errorf("job restart=%v run=%d checkpoint=%s triggers=%d", j.Restart, j.Run.ID, j.Run.Checkpoint, len(j.Triggers))
		}
		return "resumed A", nil
	}
	// The first resumed run is stopped by a shutdown whose grace ends: it is
	// left running for the next start.
	h.agent.mu.Lock()
	entered := make(chan struct{})
	orig := h.agent.reply["engineer"]
	h.agent.reply["engineer"] = func(ctx context.Context, j *core.Job) (string, error) {
		if entered != nil {
			close(entered)
			entered = nil
			<-ctx.Done()
			return "", ctx.Err()
		}
		return orig(ctx, j)
	}
	h.agent.mu.Unlock()
	// A short grace for the first start only: the settling of the resumed run
	// is bounded by the grace too.
	h.opts = func(o *core.Options) { o.ShutdownGrace = 10 * time.Millisecond }
	wait := entered
	h.start()
	<-wait
	h.stop()
	h.opts = nil
	h.start()
	h.idle()

	if n := len(h.agent.jobsFor("engineer")); n != 2 {
		t.Fatalf("engineer jobs = %d, want 2 (stopped by the shutdown, then resumed)", n)
	}
	var texts []string
	for _, m := range h.messages(a.Thread) {
		texts = append(texts, m.Text)
		if strings.Contains(m.Text, "restarted") || strings.Contains(m.Text, "could not finish") {
			t.Errorf("unexpected notice %q", m.Text)
		}
	}
	if got := strings.Count(strings.Join(texts, "\n"), "resumed A"); got != 1 {
		t.Errorf("thread = %q, want the reply once", texts)
	}
	err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		r, err := tx.Run(runID)
		if err != nil {
			return err
		}
		it, err := tx.Item(itemID)
		if err != nil {
			return err
		}
		if r.Status != core.RunCompleted || it.Status != core.ItemDone || len(r.Checkpoint) != 0 {
			return fmt.Errorf("run %s (checkpoint %d bytes), item %s", r.Status, len(r.Checkpoint), it.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRestartStartsRunWithoutCheckpointAgain: a running run without a step
// checkpoint (the process died between the pick and the agent's first
// checkpoint) is started again from the beginning under the same run id with
// its triggers (a fresh Job, not Restart), its item ends done and its reply is
// posted once, with no notice; Run.Restarts counts the start.
func TestRestartStartsRunWithoutCheckpointAgain(t *testing.T) {
	h := newHarness(t, core.Limits{})
	a, runID, itemID := leftRunning(t, h, nil)
	h.agent.reply["engineer"] = func(_ context.Context, j *core.Job) (string, error) {
		if j.Restart || j.Resume != nil || j.Run.ID != runID || len(j.Triggers) != 1 || j.Triggers[0].ID != a.Message {
			return "", fmt.Errorf("job restart=%v run=%d triggers=%d", j.Restart, j.Run.ID, len(j.Triggers))
		}
		return "answered A", nil
	}
	h.start()
	h.idle()

	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer jobs = %d, want 1", n)
	}
	replies := 0
	for _, m := range h.messages(a.Thread) {
		if m.Kind == core.KindNotice {
			t.Errorf("unexpected notice %q", m.Text)
		}
		if m.Text == "answered A" {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("reply posted %d times, want 1", replies)
	}
	r := h.run(runID)
	if r.Status != core.RunCompleted || r.Restarts != 1 {
		t.Fatalf("run = %s with %d restarts, want completed with 1", r.Status, r.Restarts)
	}
	err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		it, err := tx.Item(itemID)
		if err == nil && it.Status != core.ItemDone {
			err = fmt.Errorf("item %d is %s, want done", it.ID, it.Status)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
