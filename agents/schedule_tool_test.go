package agents_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
)

type schedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *schedClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *schedClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// schedEngine runs an engine over the bolt file at path with clock (nil: the
// system clock) and returns it with its store; stop (bounded) closes both.
func schedEngine(t *testing.T, path string, agent core.Agent, bots []core.BotProfile, clock core.Clock) (*engineRun, core.Store) {
	t.Helper()
	return runEngine(t, path, core.Options{Agent: agent, Bots: bots, Clock: clock})
}

// scheduleModel answers a person's "create"/"list"/"delete" with the matching
// schedule call, a tool result with "result: <text>", and a scheduled prompt
// with "tick".
func scheduleModel(t *testing.T) *openaitest.Server {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		last := r.Body.Messages[len(r.Body.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Text("result: " + last.Content)
		}
		switch {
		case strings.Contains(last.Content, "post the status"):
			return openaitest.Text("tick")
		case strings.Contains(last.Content, "please create"):
			return openaitest.Calls(openaitest.Call("schedule", `{"action":"create","name":"status","cron":"0 * * * *","time_zone":"Europe/Berlin","prompt":"post the status"}`))
		case strings.Contains(last.Content, "please list"):
			return openaitest.Calls(openaitest.Call("schedule", `{"action":"list"}`))
		case strings.Contains(last.Content, "please delete"):
			return openaitest.Calls(openaitest.Call("schedule", `{"action":"delete","name":"status"}`))
		}
		return openaitest.Text("?")
	})
	return srv
}

func scheduleAgent(t *testing.T, srv *openaitest.Server) core.Agent {
	t.Helper()
	return builtinsAgent(t, srv, tools.Options{Sandbox: tools.SandboxNone})
}

func say(t *testing.T, er *engineRun, n int, text string) {
	t.Helper()
	ctx := context.Background()
	er.ingest(t, ctx, "main", text, "@engineer "+text)
	waitFor(t, "reply to "+text, func() bool { return len(er.ad.texts()) >= n })
	if err := er.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func botSchedules(t *testing.T, st core.Store) []core.BotSchedule {
	t.Helper()
	var out []core.BotSchedule
	if err := st.View(context.Background(), func(tx core.ReadTx) error {
		var err error
		out, err = core.BotSchedules(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// scheduledInThread counts the messages the schedule engineer/status wrote into thread th.
func scheduledInThread(t *testing.T, st core.Store) map[core.ThreadID]int {
	t.Helper()
	out := map[core.ThreadID]int{}
	_ = st.View(context.Background(), func(tx core.ReadTx) error {
		ths, err := tx.Threads(0)
		for _, th := range ths {
			ms, _ := tx.Messages(th.ID, 0, 0)
			for _, m := range ms {
				if m.Sender == core.ScheduleActor("engineer/status") {
					out[th.ID]++
				}
			}
		}
		return err
	})
	return out
}

// TestScheduleToolThroughAgentLoop: a bot with the schedule tool (approvals
// off) creates a schedule in its thread through the agent loop with the fake
// model, lists it and deletes it; the schedule is kept in the store, not in
// config. Before deletion, the runner fires it into the same thread once per
// slot, also across a restart of the engine and the runner (injected clock).
func TestScheduleToolThroughAgentLoop(t *testing.T) {
	srv := scheduleModel(t)
	agent := scheduleAgent(t, srv)
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"schedule"}}}
	path := filepath.Join(t.TempDir(), "openbot.db")
	clock := &schedClock{now: time.Date(2026, 6, 1, 8, 30, 0, 0, time.UTC)}

	first, st := schedEngine(t, path, agent, bots, clock)
	say(t, first, 1, "please create")
	if got := first.ad.texts(); !strings.Contains(got[0], "schedule created") || !strings.Contains(got[0], "status") {
		t.Fatalf("create reply = %q", got)
	}
	// The same call again is harmless (idempotent by name).
	say(t, first, 2, "please create again")
	if got := first.ad.texts(); !strings.Contains(got[1], "already exists") {
		t.Fatalf("second create reply = %q", got[1])
	}
	scheds := botSchedules(t, st)
	if len(scheds) != 1 || scheds[0].Bot != "engineer" || scheds[0].Name != "status" || scheds[0].TimeZone != "Europe/Berlin" || !scheds[0].Standing {
		t.Fatalf("stored schedules = %+v", scheds)
	}
	thread := scheds[0].Thread
	say(t, first, 3, "please list")
	if got := first.ad.texts(); !strings.Contains(got[2], `- status: "0 * * * *" in Europe/Berlin`) {
		t.Fatalf("list reply = %q", got[2])
	}

	runner := func(er *engineRun) *core.ScheduleRunner {
		r, err := core.NewScheduleRunner(core.ScheduleOptions{Engine: er.eng, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fire := func(er *engineRun, at time.Time) {
		t.Helper()
		clock.set(at)
		if _, err := runner(er).Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := er.eng.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	nine := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	fire(first, nine.Add(time.Minute))
	fire(first, nine.Add(2*time.Minute))
	if got := scheduledInThread(t, st); len(got) != 1 || got[thread] != 1 {
		t.Fatalf("after the 09:00 slot: scheduled messages per thread = %v, want 1 in thread %d", got, thread)
	}
	first.stop()

	second, st := schedEngine(t, path, agent, bots, clock)
	fire(second, nine.Add(3*time.Minute)) // the restarted runner does not fire 09:00 again
	if got := scheduledInThread(t, st); got[thread] != 1 {
		t.Fatalf("after restart: %v, want still 1", got)
	}
	fire(second, nine.Add(time.Hour))
	if got := scheduledInThread(t, st); len(got) != 1 || got[thread] != 2 {
		t.Fatalf("after the 10:00 slot: %v, want 2 in thread %d", got, thread)
	}
	n := len(second.ad.texts())
	say(t, second, n+1, "please delete")
	if got := second.ad.texts(); !strings.Contains(got[n], "schedule status deleted") {
		t.Fatalf("delete reply = %q", got[n])
	}
	if s := botSchedules(t, st); len(s) != 0 {
		t.Fatalf("schedules after delete = %+v", s)
	}
	fire(second, nine.Add(2*time.Hour))
	if got := scheduledInThread(t, st); got[thread] != 2 {
		t.Fatalf("a deleted schedule fired: %v", got)
	}
}

// TestScheduleToolNeedsApprovalByDefault: with the default approval_tools of
// config, a schedule call asks a person first and creates nothing meanwhile.
func TestScheduleToolNeedsApprovalByDefault(t *testing.T) {
	srv := scheduleModel(t)
	agent := scheduleAgent(t, srv)
	var approval []string
	for _, a := range config.DefaultApprovalTools() {
		approval = append(approval, a.Tool)
	}
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"schedule"}, ApprovalTools: approval}}
	er, st := schedEngine(t, filepath.Join(t.TempDir(), "openbot.db"), agent, bots, &schedClock{now: time.Date(2026, 6, 1, 8, 30, 0, 0, time.UTC)})
	ctx := context.Background()
	er.ingest(t, ctx, "main", "1", "@engineer please create")
	q := er.firstQuestion(t, ctx)
	if q.Kind != core.QuestionApproval || q.Tool != "schedule" || !strings.Contains(q.Reach, "recurring messages into this thread") {
		t.Fatalf("question = %+v", q)
	}
	if s := botSchedules(t, st); len(s) != 0 {
		t.Fatalf("a schedule was created before approval: %+v", s)
	}
}

// TestScheduleToolLimits: cron and time zone are checked with the config's
// parser, and a bot may have at most core.MaxBotSchedules schedules.
func TestScheduleToolLimits(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		last := r.Body.Messages[len(r.Body.Messages)-1]
		if last.Role == "tool" {
			counts := map[string]int{}
			for _, m := range r.Body.Messages {
				if m.Role != "tool" {
					continue
				}
				for _, k := range []string{"schedule created", "the most allowed", "expected exactly 5 fields", "unknown time zone"} {
					if strings.Contains(m.Content, k) {
						counts[k]++
					}
				}
			}
			return openaitest.Text(fmt.Sprintf("created=%d refused=%d badcron=%d badzone=%d", counts["schedule created"], counts["the most allowed"],
				counts["expected exactly 5 fields"], counts["unknown time zone"]))
		}
		calls := []openaitest.ToolCall{
			openaitest.Call("schedule", `{"action":"create","name":"bad","cron":"0 9 * *","prompt":"x"}`),
			openaitest.Call("schedule", `{"action":"create","name":"badzone","cron":"@daily","time_zone":"Mars/Olympus","prompt":"x"}`),
		}
		for i := range core.MaxBotSchedules + 1 {
			calls = append(calls, openaitest.Call("schedule", fmt.Sprintf(`{"action":"create","name":"s%d","cron":"@hourly","prompt":"x"}`, i)))
		}
		return openaitest.Calls(calls...)
	})
	agent := scheduleAgent(t, srv)
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"schedule"}}}
	er, st := schedEngine(t, filepath.Join(t.TempDir(), "openbot.db"), agent, bots, &schedClock{now: time.Date(2026, 6, 1, 8, 30, 0, 0, time.UTC)})
	say(t, er, 1, "please create many")
	want := fmt.Sprintf("created=%d refused=1 badcron=1 badzone=1", core.MaxBotSchedules)
	if got := er.ad.texts(); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("reply = %q, want %q", got, want)
	}
	if n := len(botSchedules(t, st)); n != core.MaxBotSchedules {
		t.Errorf("%d schedules stored, want %d", n, core.MaxBotSchedules)
	}
}
