package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

// TestScheduleOnlyIfNewMessagesSkipsQuietSlots: with nothing new, ten slots
// in a row are skipped (a line each) and no run starts; a person's message
// makes the next slot fire; the schedule's own message and the bot's reply do
// not count as new.
func TestScheduleOnlyIfNewMessagesSkipsQuietSlots(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &setClock{now: day.Add(8*time.Hour + 30*time.Minute)}
	h.opts = func(o *core.Options) { o.Clock = clock }
	h.start()
	s := standup(false)
	s.OnlyIf = core.OnlyIfNewMessages
	r := newRunner(t, h, clock, s)
	tick(t, r) // first sight: starts from now
	for i := 1; i <= 10; i++ {
		clock.set(day.Add(time.Duration(8+i) * time.Hour))
		tick(t, r)
	}
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 0 {
		t.Fatalf("%d runs over 10 quiet slots, want none", n)
	}
	if n := countActivity(h, "schedule_skipped", "nothing new"); n != 10 {
		t.Errorf("%d skipped lines, want 10", n)
	}
	if n := len(scheduledMessages(t, h)); n != 0 {
		t.Errorf("%d schedule messages, want none", n)
	}

	clock.set(day.Add(18*time.Hour + 30*time.Minute))
	h.say("the deploy broke")
	h.idle()
	clock.set(day.Add(19 * time.Hour))
	tick(t, r)
	h.idle()
	if n := len(scheduledMessages(t, h)); n != 1 {
		t.Fatalf("%d schedule messages after a new message, want 1", n)
	}
	clock.set(day.Add(20 * time.Hour))
	tick(t, r)
	h.idle()
	if n := len(scheduledMessages(t, h)); n != 1 {
		t.Errorf("the schedule's own message and the reply counted as new: %d firings", n)
	}
}

// TestScheduleOnlyIfNewEvents: a person's message is not an event; a
// trigger's is.
func TestScheduleOnlyIfNewEvents(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &setClock{now: day.Add(8*time.Hour + 30*time.Minute)}
	h.opts = func(o *core.Options) { o.Clock = clock }
	h.start()
	s := standup(false)
	s.OnlyIf = core.OnlyIfNewEvents
	r := newRunner(t, h, clock, s)
	tick(t, r)
	h.say("hello")
	h.idle()
	clock.set(day.Add(9 * time.Hour))
	tick(t, r)
	if n := len(scheduledMessages(t, h)); n != 0 {
		t.Fatalf("a person's message fired a new_events schedule")
	}
	clock.set(day.Add(9*time.Hour + 10*time.Minute))
	h.say("deploy failed", func(in *core.Inbound) {
		in.SenderID, in.Announce, in.ThreadKey, in.Conversation = "trigger:ci", true, "hook:ci:1", "ops"
	})
	h.idle()
	clock.set(day.Add(10 * time.Hour))
	tick(t, r)
	if n := len(scheduledMessages(t, h)); n != 1 {
		t.Errorf("%d firings after a trigger's event, want 1", n)
	}
}

func countActivity(h *harness, event, sub string) int {
	h.t.Helper()
	n := 0
	for before := uint64(0); ; {
		var page []core.Activity
		h.store.View(context.Background(), func(tx core.ReadTx) error {
			var err error
			page, err = tx.ActivitiesBefore(before, 100)
			return err
		})
		if len(page) == 0 {
			return n
		}
		for _, a := range page {
			if a.Event == event && strings.Contains(a.Summary, sub) {
				n++
			}
		}
		before = page[len(page)-1].Seq
	}
}
