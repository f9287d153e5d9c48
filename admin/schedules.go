package admin

import (
	"net/http"
	"strconv"
	"time"

	"openbot/core"
)

// Schedule is one row of GET /api/v1/schedules: a schedule a bot made with the
// schedule tool (DESIGN.md §10 "schedules"). Configured schedules live in the
// config file and are listed by `openbot schedules`.
type Schedule struct {
	// ID is "<bot>/<name>", the list's order and cursor.
	ID       string `json:"id"`
	Name     string `json:"name"`
	Bot      string `json:"bot"`
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone"`
	Prompt   string `json:"prompt"`
	// Thread is "standing" (every firing into ThreadID, where it was made) or
	// "new" (a new thread in the conversation per firing).
	Thread       string               `json:"thread"`
	ThreadID     core.ThreadID        `json:"thread_id"`
	Account      core.AccountID       `json:"account"`
	Platform     string               `json:"platform"`
	Conversation core.ConversationRef `json:"conversation"`
	Created      time.Time            `json:"created"`
	// Next is the first slot after now; LastHandled the last slot fired or
	// skipped (absent before the first).
	Next        *time.Time `json:"next,omitempty"`
	LastHandled *time.Time `json:"last_handled,omitempty"`
}

// schedules is GET /api/v1/schedules: bot-made schedules ordered by ID, paged
// by ?cursor= (the ID of the previous page's last row), filtered by ?bot=.
func (s *Server) schedules(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	cursor, bot := q.str("cursor"), q.bot("bot")
	if !q.ok(w) {
		return
	}
	now := s.opts.Clock.Now()
	var out []Schedule
	var next string
	ok := s.view(w, r, func(tx core.ReadTx) error {
		out, next = nil, "" // fn may run again (core.Store.View)
		all, err := core.BotSchedules(tx)
		if err != nil {
			return err
		}
		for _, b := range all {
			if b.ID() <= cursor && cursor != "" || bot != "" && core.BotActorID(b.Bot) != bot {
				continue
			}
			if len(out) == q.limit {
				next = out[len(out)-1].ID
				break
			}
			row := Schedule{ID: b.ID(), Name: b.Name, Bot: b.Bot, Cron: b.Cron, TimeZone: b.TimeZone, Prompt: capText(b.Prompt, textCap),
				Thread: "new", Account: b.Account, Platform: b.Platform, Conversation: b.Conversation, Created: b.Created}
			if b.Standing {
				row.Thread, row.ThreadID = "standing", b.Thread
			}
			if fn, err := core.CronNext(b.Cron, b.TimeZone); err == nil {
				if t := fn(now); !t.IsZero() {
					row.Next = &t
				}
			}
			if v, err := tx.Cursor(core.ScheduleCursor(b.ID())); err == nil && v != "" {
				// The cursor starts at the creation time: nothing handled yet.
				if sec, err := strconv.ParseInt(v, 10, 64); err == nil && sec != b.Created.Unix() {
					t := time.Unix(sec, 0).UTC()
					row.LastHandled = &t
				}
			}
			out = append(out, row)
		}
		return nil
	})
	if ok {
		writeJSON(w, http.StatusOK, page(out, next))
	}
}
