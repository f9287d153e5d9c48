package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"openbot/core"
)

// streamBatch bounds what one stream reads from each sequence per store read,
// so a client far behind is served in bounded steps, never a whole log at once.
const streamBatch = 100

// writeBound is how long one batch of events may take to reach a client before
// the stream gives up on it.
const writeBound = 30 * time.Second

// events is GET /api/v1/events, Server-Sent Events read from the store after a
// cursor (DESIGN.md §10). The start is the Last-Event-ID header (a reconnecting
// browser sends it), else ?from= (an id, or 0 for the whole log), else the
// current end: a new stream sees only what happens from now. A malformed id
// answers 400; each part of an id beyond the store's head (a restored store)
// is taken as the head, so the stream goes on from now instead of staying
// silent; the stream's first comment (": from A.M.E") names the start used. Each event's id is
// the cursor after it (Cursor), so a client that reconnects with the last id it
// saw gets exactly what it missed. The stream wakes on the store's commit hint
// (Notifier) or every Tick, writes a ": ping" comment every Heartbeat, and ends
// when the client goes away or Shutdown is called. At most MaxStreams run at
// once (503 beyond).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	start := r.Header.Get("Last-Event-ID")
	if start == "" {
		start = r.URL.Query().Get("from")
	}
	var cur Cursor
	switch start {
	case "":
		var h core.LogHeads
		if !s.view(w, r, func(tx core.ReadTx) (err error) { h, err = tx.Heads(); return err }) {
			return
		}
		cur = cursorOf(h)
	case "0":
	default:
		c, err := ParseCursor(start)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		// An id beyond the store's head (a store restored from a backup, or a
		// made-up id) would keep the stream silent: start from the head there.
		var h core.LogHeads
		if !s.view(w, r, func(tx core.ReadTx) (err error) { h, err = tx.Heads(); return err }) {
			return
		}
		head := cursorOf(h)
		cur = Cursor{min(c.Activity, head.Activity), min(c.Message, head.Message), min(c.RunEvent, head.RunEvent)}
	}
	select {
	case <-s.done:
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	default:
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		writeError(w, http.StatusServiceUnavailable, "too many event streams; try again later")
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeBound)) // not every writer supports it
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	fmt.Fprintf(bw, "retry: 2000\n: from %s\n\n", cur)
	if flush() != nil {
		return
	}
	ctx := r.Context()
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	beat := time.NewTicker(s.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-s.done:
			return
		default:
		}
		var wake <-chan struct{}
		if s.opts.Notifier != nil {
			wake = s.opts.Notifier.Wait()
		}
		var evs []Event
		var full bool
		next := cur
		err := s.opts.Store.View(ctx, func(tx core.ReadTx) (err error) {
			evs, next, full, err = readEvents(tx, cur, streamBatch)
			return err
		})
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, core.ErrNotFound) {
				s.opts.Logger.Error("event stream read", "err", core.Redact(err.Error()))
			}
			return
		}
		for _, ev := range evs {
			if err := writeEvent(bw, ev); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			if flush() != nil {
				return
			}
		}
		cur = next
		if full {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-wake:
		case <-tick.C:
		case <-beat.C:
			fmt.Fprint(bw, ": ping\n\n")
			if flush() != nil {
				return
			}
		}
	}
}

// writeEvent writes one SSE frame: the id (when set), the event name and the
// data as one line of JSON.
func writeEvent(bw *bufio.Writer, ev Event) error {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return err
	}
	if ev.ID != "" {
		fmt.Fprintf(bw, "id: %s\n", ev.ID)
	}
	_, err = fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", ev.Type, data)
	return err
}
