package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"openbot/internal/waitctx"
)

// Schedule is one scheduled message (DESIGN.md §10 "schedules"): at each slot of
// its timetable a message from the actor "schedule:<Name>" is ingested into its
// thread, so it routes, runs and is delivered like any message.
type Schedule struct {
	// Name is [a-z0-9_-]+, unique; the actor is "schedule:<Name>" and the slot
	// cursor is stored under "schedule/<Name>".
	Name string
	// Next returns the first slot strictly after t, or the zero time when there
	// is none. cmd builds it from a cron expression in a time zone.
	Next func(t time.Time) time.Time
	// Bot is the handle the message is addressed to.
	Bot string
	// Account, Platform and Conversation are the target: where the thread is
	// bound and the replies go (the account's adapter builds Conversation).
	Account      AccountID
	Platform     string
	Conversation ConversationRef
	// Prompt is the message text.
	Prompt string
	// Standing makes every firing go into one standing thread; false starts a
	// new thread per firing.
	Standing bool
	// Grace is how late a slot may still fire, for a slot missed while openbot
	// was down; older missed slots are recorded as skipped. At most
	// MinDedupRetention, so the slot's dedup key outlives it.
	Grace time.Duration
	// Thread and ThreadKey, when set with Standing, are the existing thread
	// every firing goes into (a bot-made schedule's own thread).
	Thread    ThreadID
	ThreadKey string
	// OnlyIf is the preflight of each slot: OnlyIfAlways ("" too) fires every
	// slot; OnlyIfNewMessages fires only when a person or a trigger posted a
	// message since the last slot, OnlyIfNewEvents only when a trigger did
	// (anywhere in the store). A slot with nothing new is skipped, with no
	// message and no model call, and logged as skipped.
	OnlyIf string
}

// Values of Schedule.OnlyIf.
const (
	OnlyIfAlways      = "always"
	OnlyIfNewMessages = "new_messages"
	OnlyIfNewEvents   = "new_events"
)

// ScheduleOptions configures a ScheduleRunner.
type ScheduleOptions struct {
	Engine    *Engine
	Schedules []Schedule
	// Clock gives "now"; defaults to the system clock.
	Clock Clock
	// MaxWait bounds one sleep of Run between checks, so a clock that jumps is
	// noticed; default 1 minute.
	MaxWait time.Duration
	Logger  *slog.Logger
}

// ScheduleRunner fires the configured schedules and the bot-made ones kept in
// the store (BotSchedules, read at every check): each slot exactly once, even
// across restarts (the slot is the message's dedup key, and a cursor per
// schedule records the last slot handled). Create it with NewScheduleRunner and
// call Run once.
type ScheduleRunner struct {
	opts ScheduleOptions
	log  *slog.Logger

	mu     sync.Mutex
	warned map[string]bool // bot schedules left out, warned about once
}

// maxCatchUp bounds how many missed slots one Tick walks per schedule; past it
// the rest are recorded as one skipped range.
const maxCatchUp = 1000

var scheduleNameRe = regexp.MustCompile(`^[a-z0-9_-]+$`)

// NewScheduleRunner checks the schedules (name, Next, bot, target, grace) and
// applies the defaults. It does no I/O.
func NewScheduleRunner(opts ScheduleOptions) (*ScheduleRunner, error) {
	if opts.Engine == nil {
		return nil, errors.New("schedules: no engine")
	}
	seen := map[string]bool{}
	for i, s := range opts.Schedules {
		switch {
		case !scheduleNameRe.MatchString(s.Name) || seen[s.Name]:
			return nil, fmt.Errorf("schedules[%d]: name %q is empty, not [a-z0-9_-]+ or repeated", i, s.Name)
		case s.Next == nil:
			return nil, fmt.Errorf("schedule %s: no timetable", s.Name)
		case !opts.Engine.cfg().knownBot(s.Bot):
			return nil, fmt.Errorf("schedule %s: unknown bot %q", s.Name, s.Bot)
		case s.Account == "" || s.Platform == "" || s.Conversation == "":
			return nil, fmt.Errorf("schedule %s: no target conversation", s.Name)
		case s.Grace < 0 || s.Grace > MinDedupRetention:
			return nil, fmt.Errorf("schedule %s: grace %s is not within 0 and %s", s.Name, s.Grace, MinDedupRetention)
		case s.OnlyIf != "" && s.OnlyIf != OnlyIfAlways && s.OnlyIf != OnlyIfNewMessages && s.OnlyIf != OnlyIfNewEvents:
			return nil, fmt.Errorf("schedule %s: only_if %q is not always, new_messages or new_events", s.Name, s.OnlyIf)
		}
		seen[s.Name] = true
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &ScheduleRunner{opts: opts, log: opts.Logger}, nil
}

// ScheduleCursor is the store cursor name of a schedule's last handled slot.
func ScheduleCursor(name string) string { return "schedule/" + name }

// ScheduleActor is the actor a schedule's messages come from.
func ScheduleActor(name string) ActorID { return ActorID("schedule:" + name) }

// Run waits for the engine to be ready, then checks the schedules until ctx is
// done: at start (firing missed slots within their grace), and again at each
// next slot (sleeping at most MaxWait at a time, so a schedule a bot creates is
// seen within MaxWait). It returns nil when ctx ends.
func (r *ScheduleRunner) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.opts.Engine.Ready():
	}
	for {
		next, err := r.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("schedules", "err", err)
		}
		wait := r.opts.MaxWait
		if !next.IsZero() {
			if d := next.Sub(r.opts.Clock.Now()); d < wait {
				wait = max(d, 0)
			}
		}
		if waitctx.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// Tick handles every slot that is due at Clock.Now(): it fires each slot that is
// at most Grace late and records older ones as skipped (an activity line each),
// then advances the schedule's cursor. A schedule seen for the first time starts
// from now, firing nothing from the past. It returns the earliest next slot of
// all schedules (zero when none).
func (r *ScheduleRunner) Tick(ctx context.Context) (time.Time, error) {
	now := r.opts.Clock.Now()
	var earliest time.Time
	var errs []error
	scheds := r.opts.Schedules
	if bots, err := r.botSchedules(ctx); err != nil {
		errs = append(errs, err)
	} else {
		scheds = append(scheds[:len(scheds):len(scheds)], bots...)
	}
	for _, s := range scheds {
		next, err := r.tickOne(ctx, s, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", s.Name, err))
		}
		if !next.IsZero() && (earliest.IsZero() || next.Before(earliest)) {
			earliest = next
		}
	}
	return earliest, errors.Join(errs...)
}

func (r *ScheduleRunner) tickOne(ctx context.Context, s Schedule, now time.Time) (time.Time, error) {
	st := r.opts.Engine.Store()
	var cur string
	if err := st.View(ctx, func(tx ReadTx) error {
		var err error
		cur, err = tx.Cursor(ScheduleCursor(s.Name))
		return err
	}); err != nil {
		return time.Time{}, err
	}
	last := now
	if cur != "" {
		sec, err := strconv.ParseInt(cur, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("cursor %q: %w", cur, err)
		}
		last = time.Unix(sec, 0)
	} else if err := r.advance(ctx, s, now, nil); err != nil {
		return time.Time{}, err
	}
	slot := s.Next(last)
	for n := 0; !slot.IsZero() && !slot.After(now); n++ {
		if n == maxCatchUp {
			// Too many missed slots to walk: skip the rest in one line.
			skip := &Activity{Event: "schedule_skipped", Level: "warn", Actor: ScheduleActor(s.Name), At: now,
				Summary: fmt.Sprintf("schedule %s: more than %d slots missed up to %s; skipped", s.Name, maxCatchUp, now.UTC().Format(time.RFC3339))}
			if err := r.advance(ctx, s, now, skip); err != nil {
				return time.Time{}, err
			}
			slot = s.Next(now)
			break
		}
		if late := now.Sub(slot); late > s.Grace {
			skip := &Activity{Event: "schedule_skipped", Level: "warn", Actor: ScheduleActor(s.Name), At: now,
				Summary: fmt.Sprintf("schedule %s: slot %s missed by %s (grace %s); skipped", s.Name, slot.UTC().Format(time.RFC3339), late.Round(time.Second), s.Grace)}
			if err := r.advance(ctx, s, slot, skip); err != nil {
				return time.Time{}, err
			}
			r.log.Warn("schedule slot skipped", "schedule", s.Name, "slot", slot, "late", late)
		} else {
			fresh, err := r.anythingNew(ctx, s, last)
			if err != nil {
				return time.Time{}, err
			}
			var skip *Activity
			if fresh {
				if err := r.fire(ctx, s, slot); err != nil {
					return time.Time{}, err
				}
			} else {
				skip = &Activity{Event: "schedule_skipped", Actor: ScheduleActor(s.Name), At: now,
					Summary: fmt.Sprintf("schedule %s: slot %s skipped: nothing new since %s (only_if: %s)", s.Name, slot.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339), s.OnlyIf)}
				r.log.Info("schedule slot skipped: nothing new", "schedule", s.Name, "slot", slot, "only_if", s.OnlyIf)
			}
			if err := r.advance(ctx, s, slot, skip); err != nil {
				return time.Time{}, err
			}
		}
		last = slot
		slot = s.Next(slot)
	}
	return slot, nil
}

// maxPreflightLines bounds the activity lines one preflight reads; past it the
// slot fires (so much happened that something is new).
const maxPreflightLines = 4096

// anythingNew is s's preflight (Schedule.OnlyIf): whether a message it waits
// for was ingested after since, read newest first from the activity log.
func (r *ScheduleRunner) anythingNew(ctx context.Context, s Schedule, since time.Time) (bool, error) {
	if s.OnlyIf == "" || s.OnlyIf == OnlyIfAlways {
		return true, nil
	}
	found := false
	err := r.opts.Engine.Store().View(ctx, func(tx ReadTx) error {
		before, read := uint64(0), 0
		for read < maxPreflightLines {
			page, err := tx.ActivitiesBefore(before, 256)
			if err != nil || len(page) == 0 {
				return err
			}
			for _, a := range page {
				if !a.At.After(since) {
					return nil
				}
				from := string(a.Actor)
				if a.Event == "message.ingested" && !strings.HasPrefix(from, "schedule:") &&
					(s.OnlyIf == OnlyIfNewMessages || strings.HasPrefix(from, "trigger:")) {
					found = true
					return nil
				}
			}
			read += len(page)
			before = page[len(page)-1].Seq
		}
		found = true // too much to read: something is new
		return nil
	})
	return found, err
}

// fire ingests the slot's message. Its dedup key is the slot, so a slot fired
// before a crash that came before its cursor was saved is not fired again.
func (r *ScheduleRunner) fire(ctx context.Context, s Schedule, slot time.Time) error {
	unix := strconv.FormatInt(slot.Unix(), 10)
	key := "schedule:" + s.Name
	var thread ThreadID
	switch {
	case s.Standing && s.Thread != 0:
		key, thread = s.ThreadKey, s.Thread
	case !s.Standing:
		key += ":" + unix
	}
	res, err := r.opts.Engine.Ingest(ctx, Inbound{
		Account: s.Account, Platform: s.Platform, Conversation: s.Conversation,
		DedupKey: "schedule:" + s.Name + ":" + unix, ThreadKey: key, Thread: thread, PlatformID: "",
		SenderID: ScheduleActor(s.Name), SenderName: "schedule " + s.Name,
		Text: "@" + s.Bot + " " + s.Prompt, StartThread: true, DefaultBot: s.Bot, Received: slot,
	})
	if err != nil {
		return err
	}
	r.log.Info("schedule fired", "schedule", s.Name, "slot", slot, "thread", res.Thread, "duplicate", res.Duplicate)
	return nil
}

// advance stores slot as the last handled one, with a skipped line when given.
func (r *ScheduleRunner) advance(ctx context.Context, s Schedule, slot time.Time, skipped *Activity) error {
	return r.opts.Engine.Store().Update(ctx, func(tx Tx) error {
		if skipped != nil {
			if err := tx.AppendActivity(*skipped); err != nil {
				return err
			}
		}
		return tx.SetCursor(ScheduleCursor(s.Name), strconv.FormatInt(slot.Unix(), 10))
	})
}
