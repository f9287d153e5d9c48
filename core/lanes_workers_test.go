package core_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// gateAdapter holds every delivery until gate is closed and counts the
// deliveries in flight at once.
type gateAdapter struct {
	*recAdapter
	gate     chan struct{}
	cur, top atomic.Int32
}

func (g *gateAdapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	n := g.cur.Add(1)
	for {
		top := g.top.Load()
		if n <= top || g.top.CompareAndSwap(top, n) {
			break
		}
	}
	defer g.cur.Add(-1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return g.recAdapter.Deliver(ctx, d)
}

// A burst over more conversations than laneWorkers runs at most laneWorkers
// lane goroutines for the account: the other lanes wait with their IDs only,
// and every conversation still gets its messages, in order (DESIGN.md §4
// delivery lanes; memory flat under bursts, DESIGN.md §9).
func TestLaneGoroutinesBoundedPerAccount(t *testing.T) {
	h := newHarness(t, core.Limits{})
	ga := &gateAdapter{recAdapter: h.ad, gate: make(chan struct{})}
	h.start2(ga)
	convs := 3 * core.LaneWorkers
	for i := range convs {
		queueOutbox(t, h, core.ConversationRef(fmt.Sprint("w", i)), fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))
	}
	waitLanes(t, h, convs) // every conversation has its lane and its entries queued
	if _, running, _ := core.LaneStats(h.eng); running != core.LaneWorkers {
		t.Errorf("lanes with a goroutine = %d with %d conversations waiting, want %d", running, convs, core.LaneWorkers)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ga.cur.Load() < int32(core.LaneWorkers) && ctx.Err() == nil {
		runtime.Gosched()
	}
	close(ga.gate)
	lanesSettle(t, h)
	if top := ga.top.Load(); top > int32(core.LaneWorkers) {
		t.Errorf("%d deliveries in flight at once, want at most %d", top, core.LaneWorkers)
	}
	for i := range convs {
		c := core.ConversationRef(fmt.Sprint("w", i))
		if got, want := convTexts(h, c), []string{fmt.Sprint(i, "a"), fmt.Sprint(i, "b")}; !slices.Equal(got, want) {
			t.Errorf("%s delivered %q, want %q", c, got, want)
		}
	}
	if n, running, buffered := core.LaneStats(h.eng); running != 0 || buffered != 0 {
		t.Errorf("after the burst: %d lanes, %d running, %d buffered; want none running or buffered", n, running, buffered)
	}
}

// tokenAdapter lets one delivery through per token.
type tokenAdapter struct {
	*recAdapter
	token chan struct{}
}

func (a *tokenAdapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	select {
	case <-a.token:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return a.recAdapter.Deliver(ctx, d)
}

// With every goroutine of an account busy, a waiting conversation takes its
// turn after one entry of a busy one, not after the busy ones drained their
// queues; each conversation's order is kept.
func TestWaitingLaneTakesTurns(t *testing.T) {
	h := newHarness(t, core.Limits{})
	ta := &tokenAdapter{recAdapter: h.ad, token: make(chan struct{})}
	h.start2(ta)
	const each = 3
	for i := range core.LaneWorkers {
		c := core.ConversationRef(fmt.Sprint("busy", i))
		queueOutbox(t, h, c, fmt.Sprint(i, "a"), fmt.Sprint(i, "b"), fmt.Sprint(i, "c"))
	}
	queueOutbox(t, h, "late", "late")
	waitLanes(t, h, core.LaneWorkers+1)
	for range core.LaneWorkers*each + 1 {
		ta.token <- struct{}{}
	}
	lanesSettle(t, h)
	pos := -1
	for i, d := range h.ad.deliveries() {
		if d.Conversation == "late" {
			pos = i
		}
	}
	if pos < 0 || pos >= core.LaneWorkers*(each-1) {
		t.Errorf("the waiting conversation was delivered %dth of %d, want within the first %d (a turn after one entry of each busy one)",
			pos+1, core.LaneWorkers*each+1, core.LaneWorkers*(each-1))
	}
	for i := range core.LaneWorkers {
		c := core.ConversationRef(fmt.Sprint("busy", i))
		if got, want := convTexts(h, c), []string{fmt.Sprint(i, "a"), fmt.Sprint(i, "b"), fmt.Sprint(i, "c")}; !slices.Equal(got, want) {
			t.Errorf("%s delivered %q, want %q", c, got, want)
		}
	}
}
