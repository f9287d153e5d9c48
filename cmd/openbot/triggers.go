package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/adapters/hooks"
	"openbot/admin"
	"openbot/config"
	"openbot/core"
)

// hookTriggers maps the triggers section onto hooks.Trigger values, building
// each target conversation with its adapter's own id codec.
func hookTriggers(cfg *config.Config) ([]hooks.Trigger, error) {
	out := make([]hooks.Trigger, 0, len(cfg.Triggers))
	for i, t := range cfg.Triggers {
		ht := hooks.Trigger{Name: t.Name, Kind: t.Kind, Secret: t.Secret, Bot: t.Bot, Thread: t.Thread,
			Events: t.Events, When: t.When, Message: t.Message, RunsPer: t.RateLimit.Runs, Per: t.RateLimit.Per,
			MaxRunsPerDay: t.MaxRunsPerDay, MaxBody: t.MaxBodyBytes, Window: t.Window}
		var err error
		ht.Account, ht.Platform, ht.Conversation, err = targetConversation(t.PostTo.Account, t.PostTo.Conversation, t.PostTo.Team, t.PostTo.Topic)
		if err != nil {
			return nil, fmt.Errorf("triggers[%d].post_to: %w", i, err)
		}
		out = append(out, ht)
	}
	return out, nil
}

// newHooks builds the /hooks/ server of the configured triggers (every
// request under /hooks/ is refused alike when there are none).
func newHooks(cfg *config.Config, eng *core.Engine, log *slog.Logger) (*hooks.Server, error) {
	ts, err := hookTriggers(cfg)
	if err != nil {
		return nil, err
	}
	return hooks.New(hooks.Options{Engine: eng, Triggers: ts, Logger: log})
}

// notifyTargets maps the notify section onto core.NotifyTarget values.
func notifyTargets(cfg *config.Config) ([]core.NotifyTarget, error) {
	out := make([]core.NotifyTarget, 0, len(cfg.Notify))
	for i, n := range cfg.Notify {
		nt := core.NotifyTarget{Name: n.Name, Bots: n.Bots}
		var err error
		nt.Account, nt.Platform, nt.Conversation, err = targetConversation(n.Account, n.Conversation, n.Team, n.Topic)
		if err != nil {
			return nil, fmt.Errorf("notify[%d]: %w", i, err)
		}
		out = append(out, nt)
	}
	return out, nil
}

// lastDeliveries is how many stored events `openbot triggers` shows per trigger.
const lastDeliveries = 3

// runTriggers is `openbot triggers --config FILE`: every configured trigger
// with its path, kind, bot, target, filters and limits, then its last stored
// events, read from the activity log through the console API (in process over
// the store, or through the running server).
func runTriggers(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("triggers", stderr)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	if len(cfg.Triggers) == 0 {
		fmt.Fprintln(stdout, "no triggers are configured")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPATH\tKIND\tBOT\tPOST TO\tTHREAD\tEVENTS\tLIMITS")
	for _, t := range cfg.Triggers {
		target := strings.TrimSpace(t.PostTo.Account + " " + t.PostTo.Conversation)
		limits := "-"
		if t.RateLimit.Runs > 0 {
			limits = fmt.Sprintf("%d runs/%s", t.RateLimit.Runs, t.RateLimit.Per)
		}
		if t.MaxRunsPerDay > 0 {
			limits = strings.TrimPrefix(limits+fmt.Sprintf(", %d runs/day", t.MaxRunsPerDay), "-, ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t@%s\t%s\t%s\t%s\t%s\n", t.Name, hooks.Prefix+t.Name, t.Kind, t.Bot, target,
			cmp.Or(t.Thread, "(a new thread per event)"), cmp.Or(strings.Join(t.Events, ","), "(all)"), limits)
	}
	tw.Flush()

	api, err := openAPI(ctx, cfg)
	if errors.Is(err, errNoStore) {
		fmt.Fprintln(stdout, "\nno deliveries yet: nothing has run with this config")
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stdout, "\n(last deliveries unknown: %v)\n", err)
		return exitOK
	}
	defer api.close()
	fmt.Fprintln(stdout, "\nLAST DELIVERIES (stored events, newest first)")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIGGER\tWHEN\tTHREAD\tWHAT")
	for _, t := range cfg.Triggers {
		var p admin.Page[core.Activity]
		q := "/api/v1/activity?kind=message.ingested&actor=" + url.QueryEscape("trigger:"+t.Name) + "&limit=" + strconv.Itoa(lastDeliveries)
		if err := api.get(ctx, q, &p); err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t(unknown: %v)\n", t.Name, err)
			continue
		}
		if len(p.Items) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\tnone\n", t.Name)
		}
		for _, a := range p.Items {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Name, a.At.UTC().Format(time.RFC3339), a.Thread, a.Summary)
		}
	}
	tw.Flush()
	return exitOK
}
