package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"openbot/agents"
	"openbot/core"
)

// scheduleArgs are the schedule tool's arguments.
type scheduleArgs struct {
	Action   string `json:"action"`
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone"`
	Prompt   string `json:"prompt"`
	// Thread is "this" (default: every firing into this thread) or "new" (a new
	// thread in this conversation per firing).
	Thread string `json:"thread"`
}

// scheduleTool is the schedule built-in (DESIGN.md §10 "schedules"): a bot
// creates, lists and deletes its own recurring messages into this thread's
// conversation. They are kept in the store and fired by the same runner as the
// configured schedules. Every action is repeat-safe (DESIGN.md §8): list reads,
// delete by name is idempotent, and create is idempotent by name (the same
// spec again is a no-op; another spec under that name is refused). A person
// approves its calls by default (config.DefaultApprovalTools).
func scheduleTool() agents.Tool {
	return &tool{
		name: "schedule",
		reach: func(bot string) string {
			return "creates, lists or deletes @" + bot + "'s recurring messages into this thread (or new threads in its conversation), which wake @" + bot + " at each time of the schedule until deleted"
		},
		repeat: func(args json.RawMessage) bool {
			var a scheduleArgs
			return decodeArgs(args, &a) == nil && (a.Action == "create" || a.Action == "list" || a.Action == "delete")
		},
		desc: "Manage your recurring scheduled messages. action=create: at every time of `cron` " +
			"(five fields \"0 9 * * MON-FRI\" or @hourly/@daily/@weekly/@monthly) in `time_zone` (IANA, default UTC) " +
			"a message with `prompt` addressed to you is posted into this thread (thread=this, the default) or starts " +
			"a new thread in this conversation (thread=new); `name` ([a-z0-9_-], at most 40) identifies it. " +
			fmt.Sprintf("At most %d schedules per bot. action=list: your schedules. action=delete: remove the schedule `name`.", core.MaxBotSchedules),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"action":{"type":"string","enum":["create","list","delete"]},` +
			`"name":{"type":"string","description":"Schedule name, [a-z0-9_-], at most 40; for create and delete"},` +
			`"cron":{"type":"string","description":"Cron expression, five fields or @daily etc.; for create"},` +
			`"time_zone":{"type":"string","description":"IANA time zone, default UTC; for create"},` +
			`"prompt":{"type":"string","description":"The message you will receive at each time; for create"},` +
			`"thread":{"type":"string","enum":["this","new"],"description":"this (default): into this thread; new: a new thread each time"}},` +
			`"required":["action"],"additionalProperties":false}`),
		fn: scheduleCall,
	}
}

func scheduleCall(ctx context.Context, call agents.ToolCall) (string, error) {
	var a scheduleArgs
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	sc, ok := call.Env.(core.BotScheduler)
	if !ok {
		return "", agents.NotRun(errors.New("schedule is not available outside a run"))
	}
	switch a.Action {
	case "create":
		standing := true
		switch a.Thread {
		case "", "this":
		case "new":
			standing = false
		default:
			return "", agents.NotRun(fmt.Errorf("thread is %q; use this or new", a.Thread))
		}
		s, existed, err := sc.CreateSchedule(ctx, core.BotScheduleSpec{Name: a.Name, Cron: a.Cron, TimeZone: a.TimeZone, Prompt: a.Prompt, Standing: standing})
		if err != nil {
			return "", agents.NotRun(err)
		}
		if existed {
			return "schedule " + s.Name + " already exists as asked:\n" + renderSchedule(s), nil
		}
		return "schedule created:\n" + renderSchedule(s), nil
	case "list":
		all, err := sc.Schedules(ctx)
		if err != nil {
			return "", fmt.Errorf("read schedules: %v", err)
		}
		if len(all) == 0 {
			return "you have no schedules", nil
		}
		lines := make([]string, len(all))
		for i, s := range all {
			lines[i] = renderSchedule(s)
		}
		return strings.Join(lines, "\n"), nil
	case "delete":
		if a.Name == "" {
			return "", agents.NotRun(errors.New("name is required for delete"))
		}
		found, err := sc.DeleteSchedule(ctx, a.Name)
		if err != nil {
			return "", fmt.Errorf("delete schedule: %v", err)
		}
		if !found {
			return "you have no schedule named " + a.Name, nil
		}
		return "schedule " + a.Name + " deleted", nil
	}
	return "", agents.NotRun(fmt.Errorf("action is %q; use create, list or delete", a.Action))
}

// renderSchedule is one line: name, timetable, where it posts, prompt.
func renderSchedule(s core.BotSchedule) string {
	where := "into thread " + fmt.Sprint(s.Thread)
	if !s.Standing {
		where = "a new thread each time"
	}
	return fmt.Sprintf("- %s: %q in %s, %s: %s", s.Name, s.Cron, s.TimeZone, where, s.Prompt)
}
