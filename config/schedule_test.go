package config

import (
	"strings"
	"testing"
	"time"

	"openbot/core"
)

// A valid schedule gets its defaults; each bad field is reported at its path.
func TestScheduleValidation(t *testing.T) {
	cfg := parseOK(t, minimal+"console: [{name: local}]\nschedules:\n  - {name: s, cron: \"0 9 * * MON-FRI\", time_zone: Europe/Berlin, bot: engineer, account: console/local, prompt: hi}\n", nil)
	s := cfg.Schedules[0]
	if s.Thread != ScheduleNewThread || s.Grace != time.Hour || s.OnlyIf != core.OnlyIfAlways {
		t.Errorf("defaults: %+v", s)
	}
	next, err := core.CronNext(s.Cron, s.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	// Friday 2026-06-05 12:00 UTC -> Monday 09:00 in Berlin (07:00 UTC, summer time).
	if got := next(time.Date(2026, 6, 5, 12, 0, 0, 0, time.UTC)).UTC(); !got.Equal(time.Date(2026, 6, 8, 7, 0, 0, 0, time.UTC)) {
		t.Errorf("next = %s", got)
	}
	es := parseErrs(t, minimal+"schedules:\n  - {name: s, cron: \"61 * * * *\", time_zone: Mars/Base, bot: nobody, account: slack/none, thread: maybe, grace: 48h, only_if: sometimes}\n")
	for _, want := range []string{"schedules[0].cron", "schedules[0].bot", "schedules[0].account", "schedules[0].channel",
		"schedules[0].team", "schedules[0].prompt", "schedules[0].thread", "schedules[0].grace", "schedules[0].only_if"} {
		if !strings.Contains(es.Error(), want+":") {
			t.Errorf("errors lack %s:\n%v", want, es)
		}
	}
	es = parseErrs(t, minimal+"schedules:\n  - {name: s, cron: \"@daily\", time_zone: Mars/Base, bot: engineer, account: console/local, prompt: p}\n")
	if !strings.Contains(es.Error(), "schedules[0].time_zone: unknown time zone") {
		t.Errorf("errors: %v", es)
	}
}
