package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/admin"
	"openbot/config"
	"openbot/core"
)

// The console's reads for a terminal (DESIGN.md §10): `openbot threads`, `openbot
// runs [--thread N]`, `openbot run ID` (the timeline) and `openbot activity
// [--follow]`. Each reads the store directly, or the running server's API while
// `openbot serve` holds the store (apiReader).

// followEvery is how often `activity --follow` polls for new lines; it gives up
// after followRetries failed polls in a row (a server that is starting or
// stopping fails a few).
const (
	followEvery   = time.Second
	followRetries = 30
)

// runInspect is `openbot threads|thread|runs|run|activity`: it parses the command's
// flags, reads the API (in process or through the running server) and prints.
func runInspect(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, cfgPath := configFlags(cmd, stderr)
	limit := fs.Int("limit", 30, "how many rows (1 to 500)")
	var cfgOf *config.Config // set once loaded, for --follow's reopening
	var path func() (string, error)
	var print func(ctx context.Context, r *apiReader, path string, w io.Writer) error
	q := url.Values{}
	strs := map[string]*string{} // the string flags, passed to the API as query parameters
	str := func(name, usage string) { strs[name] = fs.String(name, "", usage) }
	switch cmd {
	case "threads":
		str("platform", "only threads bound to this platform (slack, telegram, feishu, console)")
		str("bot", "only threads this bot takes part in")
		str("q", "only threads whose title or messages contain this text")
		pending := fs.Bool("pending", false, "only threads with a question waiting for a person")
		path = func() (string, error) {
			if *pending {
				q.Set("pending", "1")
			}
			return "/api/v1/threads", nil
		}
		print = printThreads
	case "runs":
		str("thread", "only runs in this thread")
		str("bot", "only runs of this bot")
		str("status", "only runs with this status (running, waiting_human, completed, failed...)")
		path = func() (string, error) { return "/api/v1/runs", nil }
		print = printRuns
	case "thread":
		path = func() (string, error) {
			if fs.NArg() != 1 {
				return "", errors.New("usage: openbot thread ID [--limit N] [--config FILE]")
			}
			id, err := strconv.ParseUint(fs.Arg(0), 10, 64)
			if err != nil || id == 0 {
				return "", fmt.Errorf("thread id %q: want a thread number", fs.Arg(0))
			}
			return fmt.Sprintf("/api/v1/threads/%d/messages", id), nil
		}
		print = printThreadMessages
	case "run":
		path = func() (string, error) {
			if fs.NArg() != 1 {
				return "", errors.New("usage: openbot run ID [--config FILE]")
			}
			id, err := strconv.ParseUint(fs.Arg(0), 10, 64)
			if err != nil || id == 0 {
				return "", fmt.Errorf("run id %q: want a run number", fs.Arg(0))
			}
			return fmt.Sprintf("/api/v1/runs/%d", id), nil
		}
		print = printRun
	case "activity":
		str("kind", "only this event or family (run, run.failed, question...)")
		str("level", "only this level (info, warn, error)")
		str("bot", "only lines of this bot")
		str("thread", "only lines of this thread")
		follow := fs.Bool("follow", false, "keep printing new lines until interrupted")
		path = func() (string, error) { return "/api/v1/activity", nil }
		print = func(ctx context.Context, r *apiReader, p string, w io.Writer) error {
			return printActivity(ctx, r, p, w, *follow, cfgOf)
		}
	}
	// Flags may follow the run ID: parse what precedes and follows it.
	if err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	if cmd != "run" && cmd != "thread" && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "openbot %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage
	}
	if *limit < 1 || *limit > admin.MaxLimit {
		fmt.Fprintf(stderr, "openbot %s: --limit must be 1 to %d\n", cmd, admin.MaxLimit)
		return exitUsage
	}
	p, err := path()
	if err != nil {
		fmt.Fprintf(stderr, "openbot %s: %v\n", cmd, err)
		return exitUsage
	}
	q.Set("limit", strconv.Itoa(*limit))
	for name, v := range strs {
		if *v != "" {
			q.Set(name, *v)
		}
	}
	if cmd != "run" {
		p += "?" + q.Encode()
	}
	r, cfg, code := readerFor(ctx, *cfgPath, cmd, stdout, stderr, lookupEnv)
	if r == nil {
		return code
	}
	cfgOf = cfg
	defer r.close()
	if err := print(ctx, r, p, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "openbot %s: %v\n", cmd, err)
		return exitFail
	}
	return exitOK
}

// parseInterspersed parses flags before and after positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// ago is an absolute UTC time, "-" when unset.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func printThreads(ctx context.Context, r *apiReader, path string, w io.Writer) error {
	var p admin.Page[admin.ThreadSummary]
	if err := r.get(ctx, path, &p); err != nil {
		return err
	}
	if len(p.Items) == 0 {
		fmt.Fprintln(w, "no threads")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tPLATFORMS\tMESSAGES\tPENDING\tPARTICIPANTS\tTITLE")
	for _, t := range p.Items {
		title := cmp.Or(t.Title, t.Key)
		var who []string
		for _, a := range t.Participants {
			who = append(who, strings.Replace(string(a), "bot:", "@", 1))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", t.ID, ago(t.Updated), strings.Join(t.Platforms, ","), t.Messages,
			t.PendingQuestions, strings.Join(who, " "), firstRunes(title, 50))
	}
	tw.Flush()
	more(w, p.Next)
	return nil
}

// printThreadMessages prints a thread's messages, oldest first: a bot's
// summary of the thread (never posted to the platform) is marked with what it
// covers.
func printThreadMessages(ctx context.Context, r *apiReader, path string, w io.Writer) error {
	var p admin.Page[admin.MessageView]
	if err := r.get(ctx, path, &p); err != nil {
		return err
	}
	if len(p.Items) == 0 {
		fmt.Fprintln(w, "no messages")
		return nil
	}
	for _, m := range p.Items {
		who := cmp.Or(m.SenderName, strings.Replace(string(m.Sender), "bot:", "@", 1))
		kind := ""
		switch {
		case m.Kind == core.KindSummary:
			kind = fmt.Sprintf(" [summary of #1-#%d, not posted]", m.Covers)
		case m.Kind != "":
			kind = " [" + string(m.Kind) + "]"
		}
		fmt.Fprintf(w, "#%d %s %s%s: %s\n", m.ID, ago(m.Created), who, kind, strings.Join(strings.Fields(m.Text), " "))
	}
	more(w, p.Next)
	return nil
}

func printRuns(ctx context.Context, r *apiReader, path string, w io.Writer) error {
	var p admin.Page[admin.RunSummary]
	if err := r.get(ctx, path, &p); err != nil {
		return err
	}
	if len(p.Items) == 0 {
		fmt.Fprintln(w, "no runs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tBOT\tTHREAD\tSTARTED\tDURATION\tCALLS\tTOKENS\tERROR")
	for _, run := range p.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d+%d\t%s\n", run.ID, run.Status, strings.TrimPrefix(string(run.Bot), "bot:"), run.Thread,
			ago(run.Started), dur(run.DurationMS), run.Usage.ModelCalls, run.Usage.PromptTokens, run.Usage.CompletionTokens,
			orDash(firstRunes(run.Error, 60)))
	}
	tw.Flush()
	more(w, p.Next)
	return nil
}

func printRun(ctx context.Context, r *apiReader, path string, w io.Writer) error {
	var d admin.RunDetail
	if err := r.get(ctx, path, &d); err != nil {
		return err
	}
	fmt.Fprintf(w, "run %d of @%s in thread %d: %s, %s, %d model calls, %d+%d tokens\n", d.ID, strings.TrimPrefix(string(d.Bot), "bot:"),
		d.Thread, d.Status, dur(d.DurationMS), d.Usage.ModelCalls, d.Usage.PromptTokens, d.Usage.CompletionTokens)
	if d.Error != "" {
		fmt.Fprintf(w, "error: %s\n", d.Error)
	}
	for _, s := range d.Timeline {
		at := s.At.UTC().Format("15:04:05.000")
		switch s.Kind {
		case "model_call":
			fmt.Fprintf(w, "%s  #%d model %s: %d+%d tokens, %d tool calls, %s%s\n", at, s.Seq, s.Model, s.PromptTokens, s.CompletionTokens,
				s.ToolCalls, dur(s.DurationMS), errSuffix(s.Error))
		case "tool":
			res := firstRunes(s.Result, 80)
			if !s.Done {
				res = "(no result)"
			}
			if s.NotRun != "" {
				res = "not run: " + s.NotRun
			}
			fmt.Fprintf(w, "%s  #%d tool %s %s -> %s (%s)%s\n", at, s.Seq, s.Tool, firstRunes(s.Args, 80), res, dur(s.DurationMS), errSuffix(s.Error))
		case "status":
			line := fmt.Sprintf("%s  #%d status %s", at, s.Seq, s.Status)
			if s.Question != nil {
				line += fmt.Sprintf(": question %d", s.Question.ID)
				if s.Question.Decision != "" {
					line += " (" + s.Question.Decision + ")"
				}
			}
			fmt.Fprintln(w, line+errSuffix(s.Error))
		default:
			fmt.Fprintf(w, "%s  #%d %s %s\n", at, s.Seq, s.Kind, firstRunes(string(s.Payload), 80))
		}
	}
	return nil
}

// printActivity prints the newest lines oldest first; with follow it then polls
// for new ones every followEvery until ctx ends. Each poll opens the store (or
// the running server) anew, so following never keeps `serve` from starting.
func printActivity(ctx context.Context, r *apiReader, path string, w io.Writer, follow bool, cfg *config.Config) error {
	var p admin.Page[core.Activity]
	if err := r.get(ctx, path, &p); err != nil {
		return err
	}
	for i := len(p.Items) - 1; i >= 0; i-- { // the page is newest first
		printLine(w, p.Items[i])
	}
	if !follow {
		return nil
	}
	var after uint64
	if len(p.Items) > 0 {
		after = p.Items[0].Seq
	} else {
		var info admin.Info
		if err := r.get(ctx, "/api/v1/", &info); err != nil {
			return err
		}
		c, _ := admin.ParseCursor(info.Events)
		after = c.Activity
	}
	r.close()
	base, query, _ := strings.Cut(path, "?")
	vals, _ := url.ParseQuery(query)
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	failures := 0
	for {
		vals.Set("after", strconv.FormatUint(after, 10))
		var p admin.Page[core.Activity]
		rr, err := openAPI(ctx, cfg)
		if err == nil {
			err = rr.get(ctx, base+"?"+vals.Encode(), &p)
			rr.close()
		}
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return nil
		case failures < followRetries:
			// A server starting (store locked, listener not up yet) or stopping.
			failures++
		default:
			return err
		}
		for _, a := range p.Items {
			printLine(w, a)
		}
		if n, err := strconv.ParseUint(p.Next, 10, 64); err == nil {
			after = n
		}
		if len(p.Items) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func printLine(w io.Writer, a core.Activity) {
	where := ""
	if a.Thread != 0 {
		where = fmt.Sprintf(" thread %d", a.Thread)
	}
	if a.Run != 0 {
		where += fmt.Sprintf(" run %d", a.Run)
	}
	fmt.Fprintf(w, "%s %-5s %s%s: %s\n", a.At.UTC().Format(time.RFC3339), a.Level, a.Event, where, a.Summary)
}

func dur(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " error: " + firstRunes(e, 80)
}

func more(w io.Writer, next string) {
	if next != "" {
		fmt.Fprintln(w, "(more: raise --limit or page the API with cursor="+next+")")
	}
}
