package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

const schedulesConfig = `
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
bots:
  - {handle: engineer}
telegram:
  - {name: eng, bot: engineer, token: "1:x"}
slack:
  - {name: acme, bot: "*", bot_token: x, app_token: y}
schedules:
  - {name: report, cron: "@daily", bot: engineer, account: telegram/eng, channel: "-100123", topic: 42, prompt: "weekly report", thread: standing}
  - {name: standup, cron: "0 9 * * MON-FRI", time_zone: Europe/Berlin, bot: engineer, account: slack/acme, team: T1, channel: C1, prompt: standup}
`

// Each schedule's target is built with its adapter's id codec.
func TestCoreSchedulesTargets(t *testing.T) {
	cfg, err := config.Parse([]byte(schedulesConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := coreSchedules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		acc      core.AccountID
		platform string
		conv     core.ConversationRef
		standing bool
	}{{"telegram/eng", "telegram", "-100123:topic:42", true}, {"slack/acme", "slack", "T1:C1", false}}
	for i, w := range want {
		g := got[i]
		if g.Account != w.acc || g.Platform != w.platform || g.Conversation != w.conv || g.Standing != w.standing || g.Next == nil {
			t.Errorf("schedule %d = %+v, want %+v", i, g, w)
		}
	}
}

// `openbot schedules` lists every schedule with its next slot.
func TestSchedulesCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	text := schedulesConfig + "store: {path: " + filepath.Join(dir, "openbot.db") + "}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"schedules", "--config", path}, strings.NewReader(""), nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"NAME", "report", "@daily", "telegram/eng -100123 topic 42", "standing", "standup", "Europe/Berlin", "CE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// `openbot schedules` also lists the schedules bots made with the schedule
// tool, read from the store (through the console API), with their target,
// thread and next slot.
func TestSchedulesCommandListsBotMade(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	dbPath := filepath.Join(dir, "openbot.db")
	text := schedulesConfig + "store: {path: " + dbPath + "}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(dbPath, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	made := []core.BotSchedule{{Name: "nightly", Bot: "engineer", Cron: "0 2 * * *", TimeZone: "Asia/Tokyo", Prompt: "run the nightly checks",
		Standing: true, Thread: 12, Account: "telegram/eng", Platform: "telegram", Conversation: "-100123", Created: time.Now()}}
	raw, _ := json.Marshal(made)
	if err := st.Update(context.Background(), func(tx core.Tx) error {
		return tx.SetCursor(core.BotSchedulesCursor, string(raw))
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	r := runFor(t, []string{"schedules", "--config", path}, strings.NewReader(""), nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"standup", "MADE BY BOT", "engineer/nightly", "0 2 * * *", "Asia/Tokyo", "telegram/eng -100123", "standing (thread 12)", "JST"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}
