package core_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"openbot/core"
)

// queueOutbox stores one system message per text in a thread bound to conv and a
// pending outbox entry for each, in order, as the engine's routing would.
func queueOutbox(t *testing.T, h *harness, conv core.ConversationRef, texts ...string) {
	t.Helper()
	err := h.store.Update(context.Background(), func(tx core.Tx) error {
		key := "lane:" + string(conv)
		id, err := tx.ThreadByKey(key)
		if err != nil {
			th, err := tx.PutThread(core.Thread{Key: key, Bindings: []core.Binding{{Platform: "console", Conversation: conv, Accounts: []core.AccountID{"console/local"}}}})
			if err != nil {
				return err
			}
			if err := tx.BindThreadKey(key, th.ID); err != nil {
				return err
			}
			id = th.ID
		}
		for _, text := range texts {
			m, err := tx.PutMessage(core.Message{Thread: id, Sender: core.SystemActor, Kind: core.KindNotice, Text: text})
			if err != nil {
				return err
			}
			if _, err := tx.PutOutbox(core.OutboxEntry{Account: "console/local", Conversation: conv, Thread: id, Message: m.ID, Status: core.OutboxPending}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	core.KickOutbox(h.eng)
}

// lanesSettle waits until every entry is delivered and no lane goroutine runs.
func lanesSettle(t *testing.T, h *harness) (lanes, buffered int) {
	t.Helper()
	h.idle()
	for {
		n, running, buf := core.LaneStats(h.eng)
		if running == 0 {
			return n, buf
		}
		runtime.Gosched()
	}
}

// waitLanes kicks the dispatcher until the number of lanes is want.
func waitLanes(t *testing.T, h *harness, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if n, _, _ := core.LaneStats(h.eng); n == want {
			return
		}
		if ctx.Err() != nil {
			n, _, _ := core.LaneStats(h.eng)
			t.Fatalf("lanes = %d, want %d", n, want)
		}
		core.KickOutbox(h.eng)
		runtime.Gosched()
	}
}

func convTexts(h *harness, conv core.ConversationRef) []string {
	var out []string
	for _, d := range h.ad.deliveries() {
		if d.Conversation == conv {
			out = append(out, d.Text)
		}
	}
	return out
}

// An idle lane holds no buffer and no goroutine, is released after the idle
// period (engine clock), and a later message to its conversation gets a new lane
// and is delivered after the earlier ones, in order (DESIGN.md §4 delivery lanes).
func TestIdleLaneReleasedThenDeliversInOrder(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) { o.Clock = clock }
	h.start()
	queueOutbox(t, h, "c1", "one", "two", "three")
	lanes, buffered := lanesSettle(t, h)
	if lanes != 1 || buffered != 0 {
		t.Errorf("after delivery: lanes %d, buffered %d; want the idle lane kept (1) with no buffer (0)", lanes, buffered)
	}
	clock.advance(29 * time.Second)
	core.KickOutbox(h.eng)
	h.idle()
	if n, _, _ := core.LaneStats(h.eng); n != 1 {
		t.Errorf("lanes before the idle period ended = %d, want 1", n)
	}
	clock.advance(2 * time.Second)
	waitLanes(t, h, 0)
	queueOutbox(t, h, "c1", "four", "five")
	lanesSettle(t, h)
	if got, want := convTexts(h, "c1"), []string{"one", "two", "three", "four", "five"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

// A burst over many conversations leaves idle lanes without buffers or goroutines,
// and all of them are released after the idle period.
func TestManyConversationLanesReleased(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) { o.Clock = clock }
	h.start()
	const convs = 300
	for i := range convs {
		queueOutbox(t, h, core.ConversationRef(fmt.Sprint("c", i)), fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))
	}
	lanes, buffered := lanesSettle(t, h)
	if lanes != convs || buffered != 0 {
		t.Errorf("after the burst: lanes %d, buffered %d; want %d idle lanes with no buffers", lanes, buffered, convs)
	}
	for i := range convs {
		c := core.ConversationRef(fmt.Sprint("c", i))
		if got, want := convTexts(h, c), []string{fmt.Sprint(i, "a"), fmt.Sprint(i, "b")}; !slices.Equal(got, want) {
			t.Fatalf("%s delivered %q, want %q", c, got, want)
		}
	}
	clock.advance(31 * time.Second)
	waitLanes(t, h, 0)
}
