package config

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"openbot/core"
)

// Schedule is one scheduled message (DESIGN.md §10 "schedules"): at every slot of
// Cron in TimeZone, a message from "schedule:<name>" addressed to Bot is posted
// into its thread in the target conversation, and is routed, run and delivered
// like any message. Each slot fires once, even across restarts.
type Schedule struct {
	// Name is [a-z0-9_-]+, unique among schedules.
	Name string `yaml:"name"`
	// Cron is a standard five-field expression ("0 9 * * MON-FRI") or a
	// descriptor (@hourly, @daily, @weekly, @monthly).
	Cron string `yaml:"cron"`
	// TimeZone is an IANA zone ("Europe/Berlin") the expression is read in;
	// default "UTC".
	TimeZone string `yaml:"time_zone"`
	// Bot is the handle the message addresses.
	Bot string `yaml:"bot"`
	// Account is a configured account, "<kind>/<name>": "slack/acme",
	// "telegram/team", "feishu/corp", "console/local".
	Account string `yaml:"account"`
	// Channel is the conversation on that account: a Slack channel id ("C…"), a
	// Telegram chat id ("-100…"), a Feishu chat_id ("oc_…"); unused for console.
	Channel string `yaml:"channel"`
	// Team is the Slack workspace id ("T…", shown by `openbot doctor`); Slack only.
	Team string `yaml:"team"`
	// Topic is a Telegram forum topic id (message_thread_id); optional.
	Topic int64 `yaml:"topic"`
	// Prompt is the message text.
	Prompt string `yaml:"prompt"`
	// Thread is ScheduleNewThread (default: each firing starts a thread) or
	// ScheduleStandingThread (every firing goes into one thread).
	Thread string `yaml:"thread"`
	// Grace is how late a slot missed while openbot was down may still fire at
	// start; older ones are recorded as skipped. Default 1h, at most 24h.
	Grace time.Duration `yaml:"grace"`
	// OnlyIf is the slot's preflight: "always" (default) fires every slot;
	// "new_messages" only when a person or a trigger posted since the last
	// slot, "new_events" only when a trigger did. A slot with nothing new is
	// skipped with no model call and logged as skipped.
	OnlyIf string `yaml:"only_if"`
}

// Values of Schedule.Thread, and the grace bounds.
const (
	ScheduleNewThread      = "new"
	ScheduleStandingThread = "standing"
	DefaultScheduleGrace   = time.Hour
	MaxScheduleGrace       = 24 * time.Hour // the dedup keys' floor (MinDedupKeys)
)

func (c *Config) applyScheduleDefaults() {
	for i := range c.Schedules {
		s := &c.Schedules[i]
		s.TimeZone = cmp.Or(s.TimeZone, "UTC")
		s.Thread = cmp.Or(s.Thread, ScheduleNewThread)
		s.Grace = cmp.Or(s.Grace, DefaultScheduleGrace)
		s.OnlyIf = cmp.Or(s.OnlyIf, core.OnlyIfAlways)
	}
}

// checkUniqueName reports a name that is not made of a-z, 0-9, _ and - or
// that seen already holds, at field; it adds the name to seen.
func checkUniqueName(p *problems, seen map[string]bool, field, name string) {
	switch {
	case !nameRe.MatchString(name):
		p.add(field, "%q must be made of a-z, 0-9, _ and -", name)
	case seen[name]:
		p.add(field, "%q is used twice", name)
	}
	seen[name] = true
}

// validateSchedules checks each schedule: unique name, a cron expression and
// time zone that parse, a known bot, a configured account with a channel of the
// right shape, a prompt, the thread mode and the grace bounds.
func (c *Config) validateSchedules(p *problems, handles map[string]bool) {
	seen := map[string]bool{}
	for i, s := range c.Schedules {
		path := fmt.Sprintf("schedules[%d]", i)
		checkUniqueName(p, seen, path+".name", s.Name)
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			p.add(path+".time_zone", "unknown time zone %q (an IANA name such as Europe/Berlin)", s.TimeZone)
		}
		if _, err := core.CronNext(s.Cron, "UTC"); err != nil {
			p.add(path+".cron", "%v", err)
		}
		if !handles[s.Bot] {
			p.add(path+".bot", "%q is not a configured bot", s.Bot)
		}
		if strings.TrimSpace(s.Prompt) == "" {
			p.add(path+".prompt", "must be set")
		}
		checkEnum(p, path+".thread", s.Thread, ScheduleNewThread, ScheduleStandingThread)
		checkEnum(p, path+".only_if", s.OnlyIf, core.OnlyIfAlways, core.OnlyIfNewMessages, core.OnlyIfNewEvents)
		if s.Grace < 0 || s.Grace > MaxScheduleGrace {
			p.add(path+".grace", "must be between 0 and %s, got %s", MaxScheduleGrace, s.Grace)
		}
		c.checkScheduleTarget(p, path, s)
	}
}

func (c *Config) checkScheduleTarget(p *problems, path string, s Schedule) {
	c.checkTarget(p, path, "channel", s)
}

// checkTarget checks a target conversation (a schedule's, or a trigger's
// post_to with the channel named by channelKey): a configured account, a channel
// of the right shape, a team for Slack, a topic only for Telegram.
func (c *Config) checkTarget(p *problems, path, channelKey string, s Schedule) {
	kind, name, _ := strings.Cut(s.Account, "/")
	known := false
	switch kind {
	case "slack":
		for _, a := range c.Slack {
			known = known || a.Name == name
		}
		if s.Team == "" {
			p.add(path+".team", "must be set for a Slack account (the workspace id T…, shown by openbot doctor)")
		}
	case "telegram":
		for _, a := range c.Telegram {
			known = known || a.Name == name
		}
		if _, err := strconv.ParseInt(s.Channel, 10, 64); err != nil && s.Channel != "" {
			p.add(path+"."+channelKey, "%q is not a Telegram chat id (a number)", s.Channel)
		}
	case "feishu":
		for _, a := range c.Feishu {
			known = known || a.Name == name
		}
	case "console":
		for _, a := range c.Console {
			known = known || a.Name == name
		}
		known = known || (len(c.Console) == 0 && name == DefaultConsole)
	}
	if !known {
		p.add(path+".account", "%q is not a configured account (kind/name, e.g. slack/acme)", s.Account)
	}
	if kind != "console" && s.Channel == "" {
		p.add(path+"."+channelKey, "must be set (the channel or chat id to post in)")
	}
	if kind != "telegram" && s.Topic != 0 {
		p.add(path+".topic", "is for Telegram forum topics only")
	}
}
