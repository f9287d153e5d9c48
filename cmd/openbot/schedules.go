package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/adapters/console"
	"openbot/adapters/feishu"
	"openbot/adapters/slack"
	"openbot/adapters/telegram"
	"openbot/admin"
	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

// coreSchedules maps the schedules section onto core.Schedule values, building
// each target conversation with its adapter's own id codec.
func coreSchedules(cfg *config.Config) ([]core.Schedule, error) {
	out := make([]core.Schedule, 0, len(cfg.Schedules))
	for i, s := range cfg.Schedules {
		next, err := core.CronNext(s.Cron, s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d]: %w", i, err)
		}
		cs := core.Schedule{Name: s.Name, Next: next, Bot: s.Bot, Prompt: s.Prompt,
			Standing: s.Thread == config.ScheduleStandingThread, Grace: s.Grace, OnlyIf: s.OnlyIf}
		cs.Account, cs.Platform, cs.Conversation, err = targetConversation(s.Account, s.Channel, s.Team, s.Topic)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d]: %w", i, err)
		}
		out = append(out, cs)
	}
	return out, nil
}

// targetConversation builds the account, platform and conversation of a
// configured target ("kind/name" and a channel) with the adapter's own id codec.
func targetConversation(account, channel, team string, topic int64) (core.AccountID, string, core.ConversationRef, error) {
	kind, name, _ := strings.Cut(account, "/")
	switch kind {
	case "slack":
		return slack.AccountID(name), "slack", slack.Conversation{Team: team, Channel: channel}.Ref(), nil
	case "telegram":
		chat, err := strconv.ParseInt(channel, 10, 64)
		if err != nil {
			return "", "", "", fmt.Errorf("%q is not a chat id", channel)
		}
		return telegram.AccountID(name), telegram.Platform, telegram.Conversation{Chat: chat, Topic: topic}.Ref(), nil
	case "feishu":
		return core.AccountID("feishu/" + name), feishu.Platform, feishu.Conversation{Chat: channel}.Ref(), nil
	case "console":
		return core.AccountID("console/" + name), console.Platform, console.Conversation, nil
	}
	return "", "", "", fmt.Errorf("account %q is not kind/name", account)
}

// newScheduleRunner builds the runner serve starts once the engine is ready
// (DESIGN.md §10 "schedules").
func newScheduleRunner(cfg *config.Config, eng *core.Engine, log *slog.Logger) (*core.ScheduleRunner, error) {
	scheds, err := coreSchedules(cfg)
	if err != nil {
		return nil, err
	}
	return core.NewScheduleRunner(core.ScheduleOptions{Engine: eng, Schedules: scheds, Logger: log})
}

// runSchedules is `openbot schedules --config FILE`: every configured schedule
// with its timetable, target, next slot and the last slot handled (read from
// the store when openbot is not running), then the schedules bots made with the
// schedule tool, read through the console API (DESIGN.md §10 "schedules").
func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("schedules", stderr)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	var notes []string
	if len(cfg.Schedules) > 0 {
		note, err := listConfigSchedules(ctx, cfg, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "openbot: %v\n", err)
			return exitFail
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	made, err := botMadeSchedules(ctx, cfg)
	switch {
	case errors.Is(err, errNoStore):
	case err != nil:
		notes = append(notes, fmt.Sprintf("(schedules made by bots unknown: %v)", err))
	case len(made) > 0:
		if len(cfg.Schedules) > 0 {
			fmt.Fprintln(stdout)
		}
		printBotSchedules(stdout, made)
	}
	if len(cfg.Schedules) == 0 && len(made) == 0 && (err == nil || errors.Is(err, errNoStore)) {
		fmt.Fprintln(stdout, "no schedules are configured or made by bots")
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return exitOK
}

// botMadeSchedules reads every page of GET /api/v1/schedules, in process over
// the store file or through the running server (apiReader).
func botMadeSchedules(ctx context.Context, cfg *config.Config) ([]admin.Schedule, error) {
	api, err := openAPI(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer api.close()
	return getAll[admin.Schedule](ctx, api, "/api/v1/schedules?limit="+strconv.Itoa(admin.MaxLimit))
}

func printBotSchedules(w io.Writer, made []admin.Schedule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MADE BY BOT\tCRON\tZONE\tTARGET\tTHREAD\tNEXT\tLAST HANDLED")
	for _, s := range made {
		next, last := "-", "-"
		if s.Next != nil {
			if loc, err := time.LoadLocation(s.TimeZone); err == nil {
				next = s.Next.In(loc).Format("2006-01-02 15:04 MST")
			}
		}
		if s.LastHandled != nil {
			last = s.LastHandled.UTC().Format(time.RFC3339)
		}
		thread := s.Thread
		if s.ThreadID != 0 {
			thread = fmt.Sprintf("standing (thread %d)", s.ThreadID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", s.ID, s.Cron, s.TimeZone, s.Account, s.Conversation, thread, next, last)
	}
	tw.Flush()
}

// listConfigSchedules prints the configured schedules; the note says when the
// last handled slots could not be read.
func listConfigSchedules(ctx context.Context, cfg *config.Config, stdout io.Writer) (string, error) {
	last := map[string]string{}
	readLast := func(tx core.ReadTx) {
		for _, s := range cfg.Schedules {
			if v, err := tx.Cursor(core.ScheduleCursor(s.Name)); err == nil && v != "" {
				if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
					last[s.Name] = time.Unix(sec, 0).UTC().Format(time.RFC3339)
				}
			}
		}
	}
	note := ""
	if cfg.Store.Driver == config.StorePostgres {
		_, err := viewPostgres(ctx, cfg, func(tx core.ReadTx) (struct{}, error) {
			readLast(tx)
			return struct{}{}, nil
		})
		if err != nil {
			return "", err
		}
	} else if _, err := os.Stat(cfg.Store.Path); err == nil {
		st, err := bolt.Open(cfg.Store.Path, bolt.Options{Timeout: time.Second})
		switch {
		case errors.Is(err, bolt.ErrLocked):
			note = "(last slot unknown: the store is in use by a running openbot)"
		case err != nil:
			return "", err
		default:
			_ = st.View(ctx, func(tx core.ReadTx) error {
				readLast(tx)
				return nil
			})
			st.Close()
		}
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tZONE\tBOT\tTARGET\tTHREAD\tNEXT\tLAST HANDLED")
	for _, s := range cfg.Schedules {
		next := "-"
		if fn, err := core.CronNext(s.Cron, s.TimeZone); err == nil {
			if t := fn(now); !t.IsZero() {
				next = t.Format("2006-01-02 15:04 MST")
			}
		}
		target := s.Account
		if s.Channel != "" {
			target += " " + s.Channel
		}
		if s.Topic != 0 {
			target += fmt.Sprintf(" topic %d", s.Topic)
		}
		l := cmp.Or(last[s.Name], "-")
		fmt.Fprintf(tw, "%s\t%s\t%s\t@%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.TimeZone, s.Bot, target, s.Thread, next, l)
	}
	tw.Flush()
	return note, nil
}
