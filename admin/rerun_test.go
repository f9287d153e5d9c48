package admin_test

import (
	"encoding/json"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
	"openbot/core/storetest"
)

// TestReadsUnderRerun: a store may run a View callback again (core.Store.View,
// after a lost connection), so every read answer is the same on a store whose
// reads all run twice (storetest.Rerun) as on the store itself: a handler that
// appends to or counts into what outlives its callback answers twice the rows.
func TestReadsUnderRerun(t *testing.T) {
	st := openStore(t)
	seed(t, st)
	raw, _ := json.Marshal([]core.BotSchedule{
		{Name: "a", Bot: "eng", Cron: "@daily", TimeZone: "UTC", Prompt: "p", Account: "console/local", Platform: "console", Conversation: "main", Created: t0},
		{Name: "b", Bot: "qa", Cron: "0 * * * *", TimeZone: "UTC", Prompt: "p", Account: "console/local", Platform: "console", Conversation: "main", Created: t0},
	})
	update(t, st, func(tx core.Tx) error { return tx.SetCursor(core.BotSchedulesCursor, string(raw)) })
	clock := fixedClock{t0.Add(90 * time.Minute)}
	once := serveAPI(t, admin.Options{Store: st, Clock: clock})
	twice := serveAPI(t, admin.Options{Store: storetest.Rerun(st, nil), Clock: clock})
	since := t0.Add(-24 * time.Hour).Format(time.RFC3339)
	for _, path := range []string{
		"/bots",
		"/threads", "/threads?limit=2", "/threads?q=needle", "/threads/3", "/threads/3/messages",
		"/runs", "/runs?limit=3", "/runs/3",
		"/questions", "/questions/1",
		"/activity", "/activity?limit=3", "/activity?after=2&limit=3",
		"/usage",
		"/spend?since=" + since, "/spend?by=thread&since=" + since,
		"/schedules", "/schedules?limit=1",
	} {
		want, got := getBody(t, once.URL+"/api/v1"+path), getBody(t, twice.URL+"/api/v1"+path)
		if got != want {
			t.Errorf("GET %s differs when the read runs twice:\n got  %s\n want %s", path, got, want)
		}
	}
}
