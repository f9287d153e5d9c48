package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
)

type fixedNow time.Time

func (f fixedNow) Now() time.Time { return time.Time(f) }

// GET /api/v1/schedules lists the schedules bots made with the schedule tool,
// ordered by id and paged by cursor, with their next slot, filtered by bot.
func TestSchedulesList(t *testing.T) {
	st := openStore(t)
	created := time.Date(2026, 6, 1, 8, 30, 0, 0, time.UTC)
	all := []core.BotSchedule{
		{Name: "b", Bot: "engineer", Cron: "0 * * * *", TimeZone: "UTC", Prompt: "p", Standing: true, Thread: 7, Account: "console/local", Platform: "console", Conversation: "main", Created: created},
		{Name: "a", Bot: "engineer", Cron: "@daily", TimeZone: "Europe/Berlin", Prompt: "p", Account: "console/local", Platform: "console", Conversation: "main", Created: created},
		{Name: "c", Bot: "chief", Cron: "0 9 * * *", TimeZone: "UTC", Prompt: "p", Account: "console/local", Platform: "console", Conversation: "main", Created: created},
	}
	raw, _ := json.Marshal(all)
	if err := st.Update(context.Background(), func(tx core.Tx) error {
		if err := tx.SetCursor(core.ScheduleCursor("engineer/b"), "1780304400"); err != nil { // 2026-06-01 09:00 UTC
			return err
		}
		return tx.SetCursor(core.BotSchedulesCursor, string(raw))
	}); err != nil {
		t.Fatal(err)
	}
	hs := serveAPI(t, admin.Options{Store: st, Clock: fixedNow(created.Add(time.Hour))})
	items, pages := pageAll[admin.Schedule](t, hs.URL+"/api/v1/schedules?limit=2")
	if pages != 2 || len(items) != 3 {
		t.Fatalf("%d items in %d pages, want 3 in 2", len(items), pages)
	}
	if items[0].ID != "chief/c" || items[1].ID != "engineer/a" || items[2].ID != "engineer/b" {
		t.Errorf("order = %s %s %s", items[0].ID, items[1].ID, items[2].ID)
	}
	b := items[2]
	if b.Thread != "standing" || b.ThreadID != 7 || b.Next == nil || !b.Next.Equal(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)) ||
		b.LastHandled == nil || !b.LastHandled.Equal(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("engineer/b = %+v", b)
	}
	if items[1].Thread != "new" || items[1].LastHandled != nil {
		t.Errorf("engineer/a = %+v", items[1])
	}
	var p struct{ Items []admin.Schedule }
	getJSON(t, hs.URL+"/api/v1/schedules?bot=@chief", http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].Bot != "chief" {
		t.Errorf("bot filter = %+v", p.Items)
	}
}
