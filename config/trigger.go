package config

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Trigger is one authenticated inbound webhook, served at POST /hooks/<name>:
// each event it accepts becomes a message from "trigger:<name>" addressed to
// Bot, posted into PostTo as a new thread, or into the thread whose key the
// Thread template renders to (docs/triggers.md).
type Trigger struct {
	// Name is [a-z0-9_-]+, unique: the path /hooks/<name>.
	Name string `yaml:"name"`
	// Kind is how requests are authenticated: github (X-Hub-Signature-256),
	// sentry (Sentry-Hook-Signature), hmac (X-Signature over
	// "<X-Signature-Timestamp>.<body>", within Window) or bearer
	// (Authorization: Bearer <secret>).
	Kind string `yaml:"kind"`
	// Secret is the webhook secret, the client secret, the HMAC key or the
	// token; use ${ENV}. At least 16 characters.
	Secret string `yaml:"secret"`
	// Bot is the handle the events are addressed to.
	Bot string `yaml:"bot"`
	// PostTo is where the thread is posted.
	PostTo PostTo `yaml:"post_to"`
	// Thread is the thread key template, e.g.
	// "github:{repository.full_name}#{pull_request.number}": events whose keys
	// are equal join one thread. Empty: every event starts its own thread.
	Thread string `yaml:"thread"`
	// Events are the event names accepted: "pull_request" (any action) or
	// "pull_request.opened"; Sentry "issue.created"; empty accepts all.
	Events []string `yaml:"events"`
	// When are field conditions that must all hold: a dotted payload path and
	// the text it must equal ({"workflow_run.conclusion": "failure"}).
	When map[string]string `yaml:"when"`
	// Message is the template of the message, with {dotted.payload.path},
	// {event} and {trigger} placeholders. Default "Event {event} from {trigger}.".
	Message string `yaml:"message"`
	// RateLimit bounds the runs the trigger starts: at most Runs per Per.
	// Events over it are stored and posted but start no run. Default: none.
	RateLimit TriggerRate `yaml:"rate_limit"`
	// MaxRunsPerDay is the trigger's budget: runs started a UTC day; events
	// over it start no run. 0: no budget.
	MaxRunsPerDay int `yaml:"max_runs_per_day"`
	// MaxBodyBytes caps a request body; default 1 MiB, at most 25 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Window is how far an hmac request's timestamp may be from now; default 5m.
	Window time.Duration `yaml:"window"`
}

// PostTo is a trigger's target conversation.
type PostTo struct {
	// Account is a configured account, "<kind>/<name>" ("slack/acme") or its
	// bare name when no other account has it ("acme").
	Account string `yaml:"account"`
	// Conversation is a Slack channel id ("C…"), a Telegram chat id, a Feishu
	// chat_id ("oc_…"); unused for console.
	Conversation string `yaml:"conversation"`
	// Team is the Slack workspace id ("T…"); Slack only.
	Team string `yaml:"team"`
	// Topic is a Telegram forum topic id; optional.
	Topic int64 `yaml:"topic"`
}

// TriggerRate is a rate limit: Runs per Per.
type TriggerRate struct {
	Runs int           `yaml:"runs"`
	Per  time.Duration `yaml:"per"`
}

// Trigger kinds, and limits.
const (
	TriggerGitHub      = "github"
	TriggerSentry      = "sentry"
	TriggerHMAC        = "hmac"
	TriggerBearer      = "bearer"
	DefaultTriggerBody = 1 << 20
	MaxTriggerBody     = 25 << 20
	minTriggerSecret   = 16
)

var placeholderRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{[A-Za-z0-9_.\-]+\}`) })

func (c *Config) applyTriggerDefaults() {
	for i := range c.Triggers {
		t := &c.Triggers[i]
		t.MaxBodyBytes = cmp.Or(t.MaxBodyBytes, DefaultTriggerBody)
		t.Window = cmp.Or(t.Window, 5*time.Minute)
		if !strings.Contains(t.PostTo.Account, "/") {
			t.PostTo.Account = c.accountByName(t.PostTo.Account)
		}
	}
}

// accountByName returns "<kind>/<name>" of the one account named name, or
// name itself when none or several are.
func (c *Config) accountByName(name string) string {
	var found []string
	for _, a := range c.Slack {
		if a.Name == name {
			found = append(found, "slack/"+name)
		}
	}
	for _, a := range c.Telegram {
		if a.Name == name {
			found = append(found, "telegram/"+name)
		}
	}
	for _, a := range c.Feishu {
		if a.Name == name {
			found = append(found, "feishu/"+name)
		}
	}
	for _, a := range c.Console {
		if a.Name == name {
			found = append(found, "console/"+name)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return name
}

// validateTriggers checks each trigger, naming the field at fault.
func (c *Config) validateTriggers(p *problems, handles map[string]bool) {
	seen := map[string]bool{}
	for i, t := range c.Triggers {
		path := fmt.Sprintf("triggers[%d]", i)
		checkUniqueName(p, seen, path+".name", t.Name)
		checkEnum(p, path+".kind", t.Kind, TriggerGitHub, TriggerSentry, TriggerHMAC, TriggerBearer)
		if len(t.Secret) < minTriggerSecret {
			p.add(path+".secret", "must be set, at least %d characters (use ${ENV})", minTriggerSecret)
		}
		if !handles[t.Bot] {
			p.add(path+".bot", "%q is not a configured bot", t.Bot)
		}
		for key, tmpl := range map[string]string{"thread": t.Thread, "message": t.Message} {
			if strings.ContainsAny(placeholderRe().ReplaceAllString(tmpl, ""), "{}") {
				p.add(path+"."+key, "%q has a brace that is not a {field.path} placeholder", tmpl)
			}
		}
		for j, e := range t.Events {
			if strings.TrimSpace(e) == "" || slices.Contains(t.Events[:j], e) {
				p.add(fmt.Sprintf("%s.events[%d]", path, j), "%q is empty or repeated", e)
			}
		}
		for k := range t.When {
			if !regexp.MustCompile(`^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$`).MatchString(k) {
				p.add(path+".when", "%q is not a dotted field path", k)
			}
		}
		if t.RateLimit.Runs < 0 || (t.RateLimit.Runs > 0) != (t.RateLimit.Per > 0) {
			p.add(path+".rate_limit", "needs both runs and per (e.g. {runs: 10, per: 1h}), got %d per %s", t.RateLimit.Runs, t.RateLimit.Per)
		}
		if t.MaxRunsPerDay < 0 {
			p.add(path+".max_runs_per_day", "must not be negative, got %d", t.MaxRunsPerDay)
		}
		if t.MaxBodyBytes <= 0 || t.MaxBodyBytes > MaxTriggerBody {
			p.add(path+".max_body_bytes", "must be between 1 and %d, got %d", MaxTriggerBody, t.MaxBodyBytes)
		}
		if t.Window <= 0 || t.Window > time.Hour {
			p.add(path+".window", "must be between 1s and 1h, got %s", t.Window)
		}
		c.checkTarget(p, path+".post_to", "conversation", Schedule{Account: t.PostTo.Account,
			Channel: t.PostTo.Conversation, Team: t.PostTo.Team, Topic: t.PostTo.Topic})
	}
}

// NotifyTarget is a conversation bots may post into with the notify tool,
// outside the thread they work in (a daily summary into #ops). Each post
// starts a new thread there; the notify tool needs approval by default.
type NotifyTarget struct {
	// Name is what bots call the target: [a-z0-9_-]+, unique.
	Name string `yaml:"name"`
	// Account, Conversation, Team and Topic are as in a trigger's post_to.
	PostTo `yaml:",inline"`
	// Bots are the handles that may post there; empty: every bot with the tool.
	Bots []string `yaml:"bots"`
}

func (c *Config) applyNotifyDefaults() {
	for i := range c.Notify {
		if n := &c.Notify[i]; !strings.Contains(n.Account, "/") {
			n.Account = c.accountByName(n.Account)
		}
	}
}

// validateNotify checks each notify target, naming the field at fault.
func (c *Config) validateNotify(p *problems, handles map[string]bool) {
	seen := map[string]bool{}
	for i, n := range c.Notify {
		path := fmt.Sprintf("notify[%d]", i)
		checkUniqueName(p, seen, path+".name", n.Name)
		for j, b := range n.Bots {
			if !handles[b] {
				p.add(fmt.Sprintf("%s.bots[%d]", path, j), "%q is not a configured bot", b)
			}
		}
		c.checkTarget(p, path, "conversation", Schedule{Account: n.Account, Channel: n.Conversation, Team: n.Team, Topic: n.Topic})
	}
}
