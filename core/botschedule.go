package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Bot-made schedules (DESIGN.md §10 "schedules"): a bot given the schedule tool
// creates, lists and deletes its own recurring messages. They are kept in the
// store (not in config) under one cursor, BotSchedulesCursor, so they survive
// restarts without a schema change, and the ScheduleRunner fires them like
// configured ones: each slot once, across restarts.

// Limits of bot-made schedules.
const (
	// MaxBotSchedules bounds the schedules one bot may have.
	MaxBotSchedules = 50
	// MaxBotSchedulePrompt bounds a prompt, in bytes.
	MaxBotSchedulePrompt = 4000
	// BotScheduleGrace is how late a missed slot of a bot-made schedule may still
	// fire (the configured schedules' default).
	BotScheduleGrace = time.Hour
)

// BotSchedulesCursor is the store cursor holding every bot-made schedule, a JSON
// array of BotSchedule.
const BotSchedulesCursor = "schedules/bots"

var botScheduleNameRe = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

// BotSchedule is a schedule a bot made with the schedule tool. Its ID,
// "<bot>/<name>", cannot collide with a configured schedule's name (no "/").
type BotSchedule struct {
	// Name is [a-z0-9_-]{1,40}, unique among the bot's schedules.
	Name string `json:"name"`
	// Bot is the handle of the bot that made it; its messages address this bot.
	Bot string `json:"bot"`
	// Cron is a five-field expression or a descriptor, read in TimeZone (IANA).
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone"`
	Prompt   string `json:"prompt"`
	// Standing sends every firing into Thread (the thread it was made in);
	// false starts a new thread in Conversation per firing.
	Standing  bool     `json:"standing"`
	Thread    ThreadID `json:"thread"`
	ThreadKey string   `json:"thread_key"`
	// Account, Platform and Conversation are the target: the conversation of
	// the thread it was made in.
	Account      AccountID       `json:"account"`
	Platform     string          `json:"platform"`
	Conversation ConversationRef `json:"conversation"`
	Created      time.Time       `json:"created"`
}

// ID is the schedule's runner name, "<bot>/<name>": its actor is
// "schedule:<bot>/<name>" and its slot cursor "schedule/<bot>/<name>".
func (b BotSchedule) ID() string { return b.Bot + "/" + b.Name }

// CronNext parses a cron expression (standard five fields or a descriptor such
// as @daily; robfig/cron/v3, the parser config uses) in an IANA time zone
// ("" is UTC) and returns the function giving the first slot strictly after a
// time.
func CronNext(expr, zone string) (func(time.Time) time.Time, error) {
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Berlin)", zone)
	}
	if strings.Contains(expr, "TZ=") {
		return nil, errors.New("set the zone in time_zone, not in the expression")
	}
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %v", expr, err)
	}
	return func(t time.Time) time.Time { return sched.Next(t.In(loc)) }, nil
}

// BotSchedules reads every bot-made schedule, ordered by bot then name.
func BotSchedules(tx ReadTx) ([]BotSchedule, error) {
	raw, err := tx.Cursor(BotSchedulesCursor)
	if err != nil || raw == "" {
		return nil, err
	}
	var out []BotSchedule
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("bot schedules: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

func putBotSchedules(tx Tx, all []BotSchedule) error {
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return tx.SetCursor(BotSchedulesCursor, string(b))
}

// BotScheduleSpec is what the schedule tool asks for.
type BotScheduleSpec struct {
	Name, Cron, TimeZone, Prompt string
	// Standing: every firing into this thread; false: a new thread each time.
	Standing bool
}

// BotScheduler is the schedule tool's window onto the calling bot's own
// schedules; the RunEnv core hands to agents implements it. Errors are written
// for the model (a PeopleError is not needed: the tool shows them).
type BotScheduler interface {
	// CreateSchedule adds a schedule targeting the run's thread. Creating one
	// that exists with the same spec returns it with existed true (so a repeated
	// call is harmless); a different one under that name is an error. It fails
	// past MaxBotSchedules, for a bad name, cron, zone or prompt.
	CreateSchedule(ctx context.Context, spec BotScheduleSpec) (s BotSchedule, existed bool, err error)
	// Schedules lists the bot's own schedules, by name.
	Schedules(ctx context.Context) ([]BotSchedule, error)
	// DeleteSchedule removes the bot's schedule name; false when it had none.
	DeleteSchedule(ctx context.Context, name string) (bool, error)
}

var _ BotScheduler = (*runEnv)(nil)

// CreateSchedule implements BotScheduler.
func (r *runEnv) CreateSchedule(ctx context.Context, spec BotScheduleSpec) (BotSchedule, bool, error) {
	spec.Name, spec.Cron, spec.TimeZone = strings.TrimSpace(spec.Name), strings.TrimSpace(spec.Cron), strings.TrimSpace(spec.TimeZone)
	if spec.TimeZone == "" {
		spec.TimeZone = "UTC"
	}
	switch {
	case !botScheduleNameRe.MatchString(spec.Name):
		return BotSchedule{}, false, fmt.Errorf("name %q must be 1 to 40 of a-z, 0-9, _ and -", spec.Name)
	case strings.TrimSpace(spec.Prompt) == "":
		return BotSchedule{}, false, errors.New("prompt is empty")
	case len(spec.Prompt) > MaxBotSchedulePrompt:
		return BotSchedule{}, false, fmt.Errorf("prompt is %d bytes; at most %d", len(spec.Prompt), MaxBotSchedulePrompt)
	}
	next, err := CronNext(spec.Cron, spec.TimeZone)
	if err != nil {
		return BotSchedule{}, false, err
	}
	if next(r.e.clock.Now()).IsZero() {
		return BotSchedule{}, false, fmt.Errorf("cron %q never fires", spec.Cron)
	}
	t := r.job.Thread
	if len(t.Bindings) == 0 {
		return BotSchedule{}, false, errors.New("this thread is on no platform conversation to post into")
	}
	b := t.Bindings[0]
	acct, ok := r.e.router.pickAccount(b, r.job.Bot.ID())
	if !ok {
		return BotSchedule{}, false, errors.New("no account can post into this thread's conversation")
	}
	now := r.e.clock.Now()
	want := BotSchedule{Name: spec.Name, Bot: r.job.Bot.Handle, Cron: spec.Cron, TimeZone: spec.TimeZone, Prompt: spec.Prompt,
		Standing: spec.Standing, Thread: t.ID, ThreadKey: t.Key, Account: acct, Platform: b.Platform, Conversation: b.Conversation, Created: now}
	var s BotSchedule
	existed := false
	err = r.e.store.Update(ctx, func(tx Tx) error {
		s, existed = want, false // fn may run again: the last run decides
		all, err := BotSchedules(tx)
		if err != nil {
			return err
		}
		mine := 0
		for _, o := range all {
			if o.Bot != s.Bot {
				continue
			}
			mine++
			if o.Name == s.Name {
				if o.Cron == s.Cron && o.TimeZone == s.TimeZone && o.Prompt == s.Prompt && o.Standing == s.Standing && o.Thread == s.Thread {
					s, existed = o, true
					return nil
				}
				return fmt.Errorf("you already have a schedule named %q (%s in %s); delete it first or pick another name", o.Name, o.Cron, o.TimeZone)
			}
		}
		if mine >= MaxBotSchedules {
			return fmt.Errorf("you have %d schedules, the most allowed; delete one first", mine)
		}
		// The first slot is the first after now: the cursor starts here, so a
		// slot that falls before the runner next looks is still fired.
		if err := tx.SetCursor(ScheduleCursor(s.ID()), fmt.Sprint(now.Unix())); err != nil {
			return err
		}
		r.e.activity(tx, Activity{Event: "schedule.created", Summary: fmt.Sprintf("@%s created schedule %s (%s %s)", s.Bot, s.Name, s.Cron, s.TimeZone),
			Thread: t.ID, Actor: r.job.Bot.ID(), Run: r.job.Run.ID, At: now})
		return putBotSchedules(tx, append(all, s))
	})
	if err != nil {
		return BotSchedule{}, false, err
	}
	return s, existed, nil
}

// Schedules implements BotScheduler.
func (r *runEnv) Schedules(ctx context.Context) ([]BotSchedule, error) {
	var mine []BotSchedule
	err := r.e.store.View(ctx, func(tx ReadTx) error {
		mine = nil // fn may run again (core.Store.View)
		all, err := BotSchedules(tx)
		for _, s := range all {
			if s.Bot == r.job.Bot.Handle {
				mine = append(mine, s)
			}
		}
		return err
	})
	return mine, err
}

// DeleteSchedule implements BotScheduler.
func (r *runEnv) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	found := false
	err := r.e.store.Update(ctx, func(tx Tx) error {
		found = false // fn may run again: the last run decides
		all, err := BotSchedules(tx)
		if err != nil {
			return err
		}
		kept := all[:0]
		for _, s := range all {
			if s.Bot == r.job.Bot.Handle && s.Name == name {
				found = true
				continue
			}
			kept = append(kept, s)
		}
		if !found {
			return nil
		}
		if err := tx.SetCursor(ScheduleCursor(r.job.Bot.Handle+"/"+name), ""); err != nil {
			return err
		}
		r.e.activity(tx, Activity{Event: "schedule.deleted", Summary: fmt.Sprintf("@%s deleted schedule %s", r.job.Bot.Handle, name),
			Thread: r.job.Thread.ID, Actor: r.job.Bot.ID(), Run: r.job.Run.ID, At: r.e.clock.Now()})
		return putBotSchedules(tx, kept)
	})
	return found, err
}

// botSchedules reads the bot-made schedules as runner schedules, leaving out
// (with a warning) those whose bot is no longer configured or whose cron no
// longer parses.
func (r *ScheduleRunner) botSchedules(ctx context.Context) ([]Schedule, error) {
	var all []BotSchedule
	if err := r.opts.Engine.Store().View(ctx, func(tx ReadTx) error {
		var err error
		all, err = BotSchedules(tx)
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(all))
	for _, b := range all {
		next, err := CronNext(b.Cron, b.TimeZone)
		if err != nil || !r.opts.Engine.cfg().knownBot(b.Bot) {
			if r.leftOut(b.ID()) {
				r.log.Warn("bot schedule left out: its bot is not configured or its cron does not parse", "schedule", b.ID(), "err", err, "bot", b.Bot)
			}
			continue
		}
		out = append(out, Schedule{Name: b.ID(), Next: next, Bot: b.Bot, Account: b.Account, Platform: b.Platform,
			Conversation: b.Conversation, Prompt: b.Prompt, Standing: b.Standing, Grace: BotScheduleGrace,
			Thread: b.Thread, ThreadKey: b.ThreadKey})
	}
	return out, nil
}

// leftOut reports whether the schedule id is left out for the first time, so
// the warning is logged once per id, not at every check.
func (r *ScheduleRunner) leftOut(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	first := !r.warned[id]
	r.warned[id] = true
	return first
}
