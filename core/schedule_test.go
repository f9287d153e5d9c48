package core_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

type setClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *setClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *setClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

var day = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// hourly is a timetable with a slot on every full hour.
func hourly(t time.Time) time.Time { return t.Truncate(time.Hour).Add(time.Hour) }

func standup(standing bool) core.Schedule {
	return core.Schedule{Name: "standup", Next: hourly, Bot: "engineer", Account: "console/local",
		Platform: "console", Conversation: "main", Prompt: "post the status", Standing: standing, Grace: time.Hour}
}

func newRunner(t *testing.T, h *harness, clock core.Clock, s core.Schedule) *core.ScheduleRunner {
	t.Helper()
	r, err := core.NewScheduleRunner(core.ScheduleOptions{Engine: h.eng, Schedules: []core.Schedule{s}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tick(t *testing.T, r *core.ScheduleRunner) time.Time {
	t.Helper()
	next, err := r.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// scheduledMessages returns the messages the schedule actor wrote, in all threads.
func scheduledMessages(t *testing.T, h *harness) []core.Message {
	t.Helper()
	var out []core.Message
	err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		ths, err := tx.Threads(0)
		for _, th := range ths {
			ms, _ := tx.Messages(th.ID, 0, 0)
			for _, m := range ms {
				if m.Sender == core.ScheduleActor("standup") {
					out = append(out, m)
				}
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A schedule fires at its slot, not before, and not twice; the message runs the
// bot and its reply is delivered like any other.
func TestScheduleFiresOnTime(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	clock := &setClock{now: day.Add(8*time.Hour + 30*time.Minute)}
	r := newRunner(t, h, clock, standup(false))
	if next := tick(t, r); !next.Equal(day.Add(9 * time.Hour)) {
		t.Errorf("next slot = %s, want 09:00", next)
	}
	clock.set(day.Add(9*time.Hour - time.Second))
	tick(t, r)
	if n := len(scheduledMessages(t, h)); n != 0 {
		t.Fatalf("%d messages before the slot", n)
	}
	clock.set(day.Add(9 * time.Hour))
	tick(t, r)
	tick(t, r)
	h.idle()
	ms := scheduledMessages(t, h)
	if len(ms) != 1 || !strings.Contains(ms[0].Text, "post the status") {
		t.Fatalf("scheduled messages = %+v, want one", ms)
	}
	if got := h.ad.texts(); len(got) != 1 || got[0] != "[engineer] ok from engineer" {
		t.Errorf("delivered %q", got)
	}
	// The next slot opens a new thread (one thread per firing).
	clock.set(day.Add(10 * time.Hour))
	tick(t, r)
	h.idle()
	ms = scheduledMessages(t, h)
	if len(ms) != 2 || ms[0].Thread == ms[1].Thread {
		t.Errorf("second firing: %+v, want a second thread", ms)
	}
}

// A standing schedule keeps one thread.
func TestScheduleStandingThread(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	clock := &setClock{now: day.Add(8 * time.Hour)}
	r := newRunner(t, h, clock, standup(true))
	tick(t, r)
	for _, at := range []time.Duration{9 * time.Hour, 10 * time.Hour} {
		clock.set(day.Add(at))
		tick(t, r)
		h.idle()
	}
	ms := scheduledMessages(t, h)
	if len(ms) != 2 || ms[0].Thread != ms[1].Thread {
		t.Errorf("standing firings: %+v, want two in one thread", ms)
	}
}

// A slot that passes while openbot is down fires once at the next start when
// within the grace, also when the first run fired it but crashed before saving
// its cursor.
func TestScheduleRestartAcrossSlotFiresOnce(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	clock := &setClock{now: day.Add(8*time.Hour + 30*time.Minute)}
	tick(t, newRunner(t, h, clock, standup(false)))
	h.stop()

	clock.set(day.Add(9*time.Hour + 20*time.Minute))
	h.start()
	r := newRunner(t, h, clock, standup(false))
	tick(t, r)
	h.idle()
	if n := len(scheduledMessages(t, h)); n != 1 {
		t.Fatalf("%d firings after restart, want 1", n)
	}
	// A crash between the firing and its cursor: the cursor is back at 08:30.
	if err := h.store.Update(context.Background(), func(tx core.Tx) error {
		return tx.SetCursor(core.ScheduleCursor("standup"), "1780302600") // 2026-06-01T08:30:00Z
	}); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start()
	tick(t, newRunner(t, h, clock, standup(false)))
	h.idle()
	if n := len(scheduledMessages(t, h)); n != 1 {
		t.Errorf("%d firings after a replay of the slot, want 1", n)
	}
}

// Slots missed by more than the grace are not fired but recorded as skipped;
// the one within the grace fires.
func TestScheduleMissedBeyondGraceIsSkipped(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	clock := &setClock{now: day.Add(8*time.Hour + 30*time.Minute)}
	tick(t, newRunner(t, h, clock, standup(false)))
	h.stop()

	clock.set(day.Add(11*time.Hour + 30*time.Minute)) // 09:00 and 10:00 too late, 11:00 within
	h.start()
	tick(t, newRunner(t, h, clock, standup(false)))
	h.idle()
	ms := scheduledMessages(t, h)
	if len(ms) != 1 {
		t.Fatalf("%d firings, want 1 (the 11:00 slot)", len(ms))
	}
	var skipped []string
	err := h.store.View(context.Background(), func(tx core.ReadTx) error {
		acts, err := tx.Activities(0, 0)
		for _, a := range acts {
			if a.Event == "schedule_skipped" {
				skipped = append(skipped, a.Summary)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0], "2026-06-01T09:00:00Z") || !strings.Contains(skipped[1], "2026-06-01T10:00:00Z") {
		t.Errorf("skipped lines = %q, want the 09:00 and 10:00 slots", skipped)
	}
}
