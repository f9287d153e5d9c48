package admin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"openbot/core"
)

// Cursor is a position in the three append-only sequences the event stream
// follows (DESIGN.md §10): the activity log's Seq, the last message ID and the
// run events' store-wide position. Its text form "A.M.E" (three decimal numbers)
// is the SSE event id; a stream resumed from it yields exactly the events after.
type Cursor struct {
	Activity uint64
	Message  core.MessageID
	RunEvent uint64
}

func cursorOf(h core.LogHeads) Cursor { return Cursor{h.Activity, h.Message, h.RunEvent} }

// String is "A.M.E".
func (c Cursor) String() string {
	return fmt.Sprintf("%d.%d.%d", c.Activity, c.Message, c.RunEvent)
}

// ParseCursor reads "A.M.E"; anything else is an error naming the form.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	var n [3]uint64
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("event id %q: want A.M.E, three whole numbers", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return Cursor{}, fmt.Errorf("event id %q: want A.M.E, three whole numbers", s)
		}
		n[i] = v
	}
	return Cursor{n[0], core.MessageID(n[1]), n[2]}, nil
}

// Event is one event of GET /api/v1/events. Type is the SSE event name:
//
//	message.posted    a message stored in a thread (Data: MessageView)
//	run.started       a run started or resumed (Data: the activity line)
//	run.step          a run event (Data: RunStep)
//	run.finished      a run completed or failed (Data: the activity line)
//	question.asked    a run paused with a question (Data: the activity line)
//	question.decided  a question answered or expired (Data: the activity line)
//	bot.status        what a bot does after that line (Data: BotStatus)
//	activity          any other activity line (Data: the activity line)
type Event struct {
	ID   string // "" for all but the last event read from one record
	Type string
	At   time.Time
	Data any
}

// RunStep is a run event as the stream shows it (payload capped at 4000 bytes).
type RunStep struct {
	Run     core.RunID      `json:"run"`
	Seq     uint64          `json:"seq"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	At      time.Time       `json:"at"`
}

// BotStatus is a bot's status as an activity line leaves it: working in Thread
// (a run started or resumed), waiting for a person (it asked), or idle (a run
// of it ended; another of its runs may still be working in a parallel thread,
// which GET /api/v1/bots shows).
type BotStatus struct {
	Bot    core.ActorID  `json:"bot"`
	Status string        `json:"status"`
	Thread core.ThreadID `json:"thread,omitempty"`
	Run    core.RunID    `json:"run,omitempty"`
}

// activityEvents maps one activity line to its events; the last carries the id.
func activityEvents(a core.Activity, id string) []Event {
	a = withLevel(a)
	typ := "activity"
	var status string
	switch a.Event {
	case "run.started", "run.resumed":
		typ, status = "run.started", BotWorking
	case "run.completed", "run.failed", "run.recovered":
		typ, status = "run.finished", BotIdle
	case "question.asked":
		typ, status = "question.asked", BotWaiting
	case "question.answered", "question.expired":
		typ = "question.decided"
	}
	ev := Event{Type: typ, At: a.At, Data: a}
	if status == "" || !strings.HasPrefix(string(a.Actor), "bot:") {
		ev.ID = id
		return []Event{ev}
	}
	bs := BotStatus{Bot: a.Actor, Status: status, Run: a.Run}
	if status == BotWorking {
		bs.Thread = a.Thread
	}
	return []Event{ev, {ID: id, Type: "bot.status", At: a.At, Data: bs}}
}

// readEvents reads up to limit records of each sequence after c and merges them
// by time, keeping each sequence's own order, so the id of every event is a
// cursor at which resuming repeats nothing and skips nothing. full reports that
// a sequence had more than it read.
func readEvents(tx core.ReadTx, c Cursor, limit int) (evs []Event, next Cursor, full bool, err error) {
	acts, err := tx.Activities(c.Activity, limit)
	if err != nil {
		return nil, c, false, err
	}
	msgs, err := tx.MessagesSince(c.Message, limit)
	if err != nil {
		return nil, c, false, err
	}
	steps, err := tx.RunEventsSince(c.RunEvent, limit)
	if err != nil {
		return nil, c, false, err
	}
	full = len(acts) == limit || len(msgs) == limit || len(steps) == limit
	for len(acts)+len(msgs)+len(steps) > 0 {
		// pick the head with the earliest time; ties: messages, run events, activity
		pick, at := -1, time.Time{}
		if len(msgs) > 0 {
			pick, at = 0, msgs[0].Created
		}
		if len(steps) > 0 && (pick < 0 || steps[0].At.Before(at)) {
			pick, at = 1, steps[0].At
		}
		if len(acts) > 0 && (pick < 0 || acts[0].At.Before(at)) {
			pick = 2
		}
		switch pick {
		case 0:
			m := msgs[0]
			msgs, c.Message = msgs[1:], m.ID
			evs = append(evs, Event{ID: c.String(), Type: "message.posted", At: m.Created, Data: messageView(m)})
		case 1:
			e := steps[0]
			steps, c.RunEvent = steps[1:], e.Pos
			evs = append(evs, Event{ID: c.String(), Type: "run.step", At: e.At,
				Data: RunStep{Run: e.Run, Seq: e.Seq, Type: e.Type, Payload: capPayload(e.Payload), At: e.At}})
		default:
			a := acts[0]
			acts, c.Activity = acts[1:], a.Seq
			evs = append(evs, activityEvents(a, c.String())...)
		}
	}
	return evs, c, full, nil
}
