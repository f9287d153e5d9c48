package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
	"openbot/core"
)

type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestScheduleOnlyIfNewMessagesMakesNoModelCalls: a schedule into a Slack
// channel every minute with only_if: new_messages, and nothing posted: ten
// slots pass with no model call and nothing posted.
func TestScheduleOnlyIfNewMessagesMakesNoModelCalls(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("nothing to report") })
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	r := startHooks(t, "", fake.APIURL(), llm.URL(), t.TempDir())
	clock := &manualClock{now: time.Now().Truncate(time.Minute)}
	sr, err := core.NewScheduleRunner(core.ScheduleOptions{Engine: r.eng, Clock: clock, Schedules: []core.Schedule{{
		Name: "digest", Next: func(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) },
		Bot: "engineer", Account: "slack/acme", Platform: "slack", Conversation: slack.Conversation{Team: "T1", Channel: "C9"}.Ref(),
		Prompt: "summarize what is new", Grace: time.Hour, OnlyIf: core.OnlyIfNewMessages}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 11 { // the first tick only starts the timetable
		if _, err := sr.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.add(time.Minute)
	}
	r.idle()
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("%d model calls over 10 quiet slots, want none", n)
	}
	if n := len(fake.Messages()); n != 0 {
		t.Errorf("%d Slack messages, want none", n)
	}
	skipped := 0
	r.view(func(tx core.ReadTx) error {
		as, err := tx.ActivitiesBefore(0, 100)
		for _, a := range as {
			if a.Event == "schedule_skipped" {
				skipped++
			}
		}
		return err
	})
	if skipped != 10 {
		t.Errorf("%d slots logged as skipped, want 10", skipped)
	}
}
