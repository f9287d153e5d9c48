package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
)

// writeRound stores, in separate commits, a message, a run.started line of @eng
// (two events: run.started and bot.status), a run event and a question line, all
// stamped i minutes after t0.
func writeRound(t *testing.T, st core.Store, i int) {
	at := t0.Add(time.Duration(i) * time.Minute)
	update(t, st, func(tx core.Tx) error {
		_, err := tx.PutMessage(core.Message{Thread: 1, Sender: "slack:T1:U1", SenderName: "Alice", Text: fmt.Sprintf("m%d", i), Created: at})
		return err
	})
	update(t, st, func(tx core.Tx) error {
		return tx.AppendActivity(core.Activity{Event: "run.started", Summary: fmt.Sprintf("a%d", i), Thread: 1, Actor: "bot:eng", Run: 1, At: at})
	})
	update(t, st, func(tx core.Tx) error {
		_, err := tx.AppendRunEvent(core.RunEvent{Run: 1, Type: "tool_call", Payload: json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i)), At: at})
		return err
	})
	update(t, st, func(tx core.Tx) error {
		return tx.AppendActivity(core.Activity{Event: "question.answered", Summary: fmt.Sprintf("q%d", i), Thread: 1, At: at})
	})
}

// eventsUntil reads c until an event carries id end.
func eventsUntil(t *testing.T, c *sseClient, end string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev := c.next(t)
		out = append(out, ev)
		if ev.ID == end {
			return out
		}
	}
}

func headCursor(t *testing.T, api string) string {
	t.Helper()
	var info admin.Info
	getJSON(t, api+"/", http.StatusOK, &info)
	return info.Events
}

func sorted(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func render(evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s %s\n", ev.Type, ev.Data)
	}
	return b.String()
}

// hintedAPI serves the console API over a store with a running run in a
// thread, whose commits wake the event streams; with a long Tick, only that
// commit hint does. It returns the store and the API's base URL.
func hintedAPI(t *testing.T) (core.Store, string) {
	t.Helper()
	n := admin.NewNotifier()
	st := admin.Notify(openStore(t), n)
	update(t, st, func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "k", Created: t0})
		if err != nil {
			return err
		}
		_, err = tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunRunning, Created: t0})
		return err
	})
	hs := serveAPI(t, admin.Options{Store: st, Notifier: n, Tick: time.Hour, Heartbeat: time.Hour})
	return st, hs.URL + "/api/v1"
}

// TestEventsResume: a client that drops the stream and reconnects with the
// Last-Event-ID it saw gets exactly what it missed: its events before the drop
// plus those after the reconnect are the log replayed from the start, nothing
// lost, nothing twice, including what was written while it was away and what is
// written after it came back (woken by the store's commit hint).
func TestEventsResume(t *testing.T) {
	st, api := hintedAPI(t)

	writeRound(t, st, 1)
	now := openStream(t, api+"/events", "") // from now: round 1 is history to it
	first := openStream(t, api+"/events?from=0", "")
	mid := headCursor(t, api)
	got := eventsUntil(t, first, mid)
	writeRound(t, st, 2) // live: the hint wakes the stream
	end := headCursor(t, api)
	got = append(got, eventsUntil(t, first, end)...)
	// Drop in the middle of round 2: keep up to and including the event after
	// which the client last saw an id, as a browser would.
	cut := len(got) - 3
	for got[cut-1].ID == "" {
		cut--
	}
	lastID := got[cut-1].ID
	seen := got[:cut]
	first.close()

	writeRound(t, st, 3) // while away
	again := openStream(t, api+"/events", lastID)
	mid = headCursor(t, api)
	rest := eventsUntil(t, again, mid)
	writeRound(t, st, 4) // after coming back
	end = headCursor(t, api)
	rest = append(rest, eventsUntil(t, again, end)...)

	whole := eventsUntil(t, openStream(t, api+"/events?from=0", ""), end)
	// Live streams interleave the three logs in commit order, a replay by time;
	// each log keeps its own order either way, so compare the lines as multisets.
	if got, want := sorted(render(append(seen, rest...))), sorted(render(whole)); got != want {
		t.Errorf("before the drop plus after the reconnect:\n%s\nwant the whole log:\n%s", got, want)
	}
	for _, typ := range []string{"message.posted", "run.started", "bot.status", "run.step", "question.decided"} {
		if !strings.Contains(render(whole), typ+" ") {
			t.Errorf("no %s event in:\n%s", typ, render(whole))
		}
	}
	if strings.Count(render(whole), "message.posted ") != 4 {
		t.Errorf("want 4 messages in:\n%s", render(whole))
	}
	// The stream that started "now" saw rounds 2 to 4 only.
	fromNow := render(eventsUntil(t, now, end))
	if strings.Contains(fromNow, `"m1"`) || !strings.Contains(fromNow, `"m2"`) || !strings.Contains(fromNow, `"m4"`) {
		t.Errorf("stream from now:\n%s", fromNow)
	}
	// A malformed Last-Event-ID is refused with the form it wants.
	req, _ := http.NewRequest(http.MethodGet, api+"/events", nil)
	req.Header.Set("Last-Event-ID", "12")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad Last-Event-ID = %d, want 400", resp.StatusCode)
	}
}

// TestEventsBounded: streams beyond MaxStreams are refused with 503 and a
// freed slot is usable again.
func TestEventsBounded(t *testing.T) {
	st := openStore(t)
	srv, err := admin.New(admin.Options{Store: st, MaxStreams: 1, Tick: time.Hour, Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// ended hears of each request whose handler returned (its slot released).
	ended := make(chan struct{}, 8)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		ended <- struct{}{}
	}))
	t.Cleanup(hs.Close)
	c := openStream(t, hs.URL+"/api/v1/events", "")
	resp, err := http.Get(hs.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second stream = %d, want 503", resp.StatusCode)
	}
	<-ended // the refused one
	c.close()
	select {
	case <-ended: // the server saw the client go and ended the stream
	case <-time.After(20 * time.Second):
		t.Fatal("the closed stream's handler never returned")
	}
	resp, err = http.Get(hs.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the stream closed: %d, want 200 (slot freed)", resp.StatusCode)
	}
}

// TestEventsBeyondHead: a Last-Event-ID past the store's head (a restored
// store) starts the stream at the head, so the next write is seen, instead of
// a stream that stays silent.
func TestEventsBeyondHead(t *testing.T) {
	st, api := hintedAPI(t)
	writeRound(t, st, 1)
	c := openStream(t, api+"/events", "999.999.999")
	writeRound(t, st, 2)
	got := render(eventsUntil(t, c, headCursor(t, api)))
	if !strings.Contains(got, `"m2"`) || strings.Contains(got, `"m1"`) {
		t.Errorf("stream from beyond the head:\n%s\nwant round 2 only", got)
	}
}
