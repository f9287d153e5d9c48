package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/admin"
	"openbot/config"
)

const memoryUsage = `usage:
  openbot memory list [--bot H] [--config FILE]        memories, a bot's or every bot's, oldest first
  openbot memory show ID [--config FILE]               one memory with its source run
  openbot memory rm ID --bot H [--config FILE]         delete a memory of bot H
  openbot memory edit ID --bot H --text TEXT [--config FILE]
                                                       replace a memory's text (stdin when no --text)
`

// runMemory is `openbot memory list|show|rm|edit` (DESIGN.md §10 "Memory ...
// visible and editable from the console and the CLI", seed §9): through the
// console API, in process over the store file or through the running server
// with admin.token (apiReader). rm and edit name the bot so a mistyped id
// cannot change another bot's memory.
func runMemory(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, memoryUsage)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, memoryUsage)
		return exitOK
	}
	cmd := args[0]
	fs, cfgPath := configFlags("memory "+cmd, stderr)
	bot := fs.String("bot", "", "the bot's handle")
	text := fs.String("text", "", "the new text (edit; default: read stdin)")
	if err := parseInterspersed(fs, args[1:]); err != nil {
		return flagExit(err)
	}
	handle := strings.ToLower(strings.TrimPrefix(*bot, "@"))
	var id uint64
	switch cmd {
	case "list":
		if fs.NArg() != 0 {
			fmt.Fprint(stderr, memoryUsage)
			return exitUsage
		}
	case "show", "rm", "edit":
		var err error
		if fs.NArg() != 1 || (cmd != "show" && handle == "") {
			fmt.Fprint(stderr, memoryUsage)
			return exitUsage
		}
		if id, err = strconv.ParseUint(strings.TrimPrefix(fs.Arg(0), "#"), 10, 64); err != nil || id == 0 {
			fmt.Fprintf(stderr, "openbot memory %s: %q is not a memory id\n", cmd, fs.Arg(0))
			return exitUsage
		}
	default:
		fmt.Fprintf(stderr, "openbot memory: unknown command %q\n%s", cmd, memoryUsage)
		return exitUsage
	}
	newText := *text
	if cmd == "edit" && newText == "" {
		data, err := io.ReadAll(io.LimitReader(stdin, 64<<10))
		if err != nil {
			fmt.Fprintf(stderr, "openbot memory edit: read stdin: %v\n", err)
			return exitFail
		}
		newText = string(data)
	}
	if cmd == "edit" && strings.TrimSpace(newText) == "" {
		fmt.Fprintln(stderr, "openbot memory edit: the new text is empty (give --text or pipe it in)")
		return exitUsage
	}
	r, _, code := readerFor(ctx, *cfgPath, "memory", stdout, stderr, lookupEnv)
	if r == nil {
		return code
	}
	defer r.close()
	if err := memoryCommand(ctx, r, cmd, handle, id, newText, stdout); err != nil {
		fmt.Fprintf(stderr, "openbot memory %s: %v\n", cmd, err)
		return exitFail
	}
	return exitOK
}

func memoryCommand(ctx context.Context, r *apiReader, cmd, handle string, id uint64, text string, stdout io.Writer) error {
	if cmd == "list" {
		return listMemories(ctx, r, handle, stdout)
	}
	path := fmt.Sprintf("/api/v1/memories/%d", id)
	var m admin.MemoryView
	if err := r.get(ctx, path, &m); err != nil {
		return err
	}
	if cmd != "show" && m.Bot != handle {
		return fmt.Errorf("memory #%d is not @%s's", id, handle)
	}
	switch cmd {
	case "rm":
		if err := r.do(ctx, http.MethodDelete, path, nil, &m); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted memory #%d of @%s\n", id, handle)
		return nil
	case "edit":
		body, _ := json.Marshal(admin.MemoryEdit{Text: strings.TrimSpace(text)})
		if err := r.do(ctx, http.MethodPut, path, body, &m); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "memory #%d of @%s is now: %s\n", id, handle, m.Text)
		return nil
	}
	fmt.Fprintf(stdout, "memory #%d of @%s\nsource:  %s (run %s)\ncreated: %s\nupdated: %s\n", m.ID, m.Bot, m.Source, runOf(m),
		m.Created.UTC().Format(time.RFC3339), m.Updated.UTC().Format(time.RFC3339))
	if m.EmbeddingModel != "" {
		fmt.Fprintf(stdout, "embedded: %s\n", m.EmbeddingModel)
	}
	fmt.Fprintf(stdout, "\n%s\n", m.Text)
	return nil
}

// listMemories prints the memories of bot handle, or of every bot when handle
// is empty, oldest first per bot.
func listMemories(ctx context.Context, r *apiReader, handle string, stdout io.Writer) error {
	handles := []string{handle}
	if handle == "" {
		bots, err := getAll[admin.BotView](ctx, r, "/api/v1/bots")
		if err != nil {
			return err
		}
		handles = nil
		for _, b := range bots {
			handles = append(handles, b.Handle)
		}
	}
	var all []admin.MemoryView
	for _, h := range handles {
		var p admin.Page[admin.MemoryView]
		if err := r.get(ctx, "/api/v1/bots/"+url.PathEscape(h)+"/memories", &p); err != nil {
			return err
		}
		all = append(all, p.Items...)
	}
	if len(all) == 0 {
		if handle != "" {
			fmt.Fprintf(stdout, "@%s has no memories\n", handle)
		} else {
			fmt.Fprintln(stdout, "no bot has memories")
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBOT\tUPDATED\tSOURCE\tRUN\tTEXT")
	for _, m := range all {
		fmt.Fprintf(tw, "%d\t@%s\t%s\t%s\t%s\t%s\n", m.ID, m.Bot, m.Updated.UTC().Format(time.DateTime), m.Source, runOf(m), oneLine(m.Text, 100))
	}
	return tw.Flush()
}

func runOf(m admin.MemoryView) string {
	if m.Run == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(m.Run), 10)
}

// oneLine folds text onto one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
