package admin

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"openbot/core"
)

// activity is GET /api/v1/activity, the activity log, filtered by ?kind= (an
// event such as "run.failed", or a family such as "run"), ?level=, ?bot=,
// ?thread=, ?actor= (an actor id, such as "trigger:github"), ?since= and
// ?until= (RFC 3339).
//
// Paging: by default newest first, ?cursor= the Seq of the last line seen
// (Next "" at the start of the log). With ?after=N it reads forward, oldest
// first, from the line after Seq N, and Next is always the cursor to poll with
// (N itself when nothing is new): `openbot activity --follow` uses that.
func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	forward := q.r.URL.Query().Has("after")
	after, cursor := q.uint("after"), q.uint("cursor")
	kind, level, bot, actor := q.str("kind"), q.str("level"), q.bot("bot"), core.ActorID(q.str("actor"))
	thread := core.ThreadID(q.uint("thread"))
	since, until := q.time("since"), q.time("until")
	if !q.ok(w) {
		return
	}
	keep := func(a core.Activity) bool {
		lvl := cmp.Or(a.Level, "info")
		return (kind == "" || a.Event == kind || strings.HasPrefix(a.Event, kind+".")) &&
			(level == "" || lvl == level) && (bot == "" || a.Actor == bot) && (actor == "" || a.Actor == actor) && (thread == 0 || a.Thread == thread) &&
			(since.IsZero() || !a.At.Before(since)) && (until.IsZero() || a.At.Before(until))
	}
	var out []core.Activity
	next := ""
	ok := s.view(w, r, func(tx core.ReadTx) error {
		out, next = nil, "" // fn may run again (core.Store.View)
		after := after
		scanned := 0
		if forward {
			next = strconv.FormatUint(after, 10)
			for {
				batch, err := tx.Activities(after, 200)
				if err != nil || len(batch) == 0 {
					return err
				}
				for _, a := range batch {
					if len(out) == q.limit {
						return nil
					}
					after, scanned = a.Seq, scanned+1
					next = strconv.FormatUint(after, 10)
					if keep(a) {
						out = append(out, withLevel(a))
					}
				}
				if scanned >= scanBudget {
					return nil
				}
			}
		}
		before := cursor
		for {
			batch, err := tx.ActivitiesBefore(before, 200)
			if err != nil || len(batch) == 0 {
				next = ""
				return err
			}
			for _, a := range batch {
				before, scanned = a.Seq, scanned+1
				if keep(a) {
					out = append(out, withLevel(a))
					if len(out) == q.limit {
						break
					}
				}
			}
			if before <= 1 {
				return nil
			}
			if len(out) == q.limit || scanned >= scanBudget {
				next = idCursor(before)
				return nil
			}
		}
	})
	if ok {
		writeJSON(w, http.StatusOK, page(out, next))
	}
}

func withLevel(a core.Activity) core.Activity {
	a.Level = cmp.Or(a.Level, "info")
	return a
}

// UsageRow is the usage of one bot, thread, day (UTC) or model over the model
// calls of the usage ledger recorded in the window (admin/ledger.go). Runs
// counts the distinct runs of those calls; tokens are input (PromptTokens,
// cached included) and output; CostMicros is in millionths of the prices'
// currency. A model row's key is "<llm profile>/<model asked for>"; Provider,
// Served (the models the server named, when another), Keys (API key labels)
// and Fallbacks (calls a backup profile served) are set on model rows only.
type UsageRow struct {
	Key              string   `json:"key"`
	Provider         string   `json:"provider,omitempty"`
	Served           []string `json:"served,omitempty"`
	Keys             []string `json:"keys,omitempty"`
	Fallbacks        int      `json:"fallbacks,omitempty"`
	Runs             int      `json:"runs"`
	ModelCalls       int      `json:"model_calls"`
	PromptTokens     int      `json:"prompt_tokens"`
	CompletionTokens int      `json:"completion_tokens"`
	CachedTokens     int      `json:"cached_tokens"`
	CostMicros       int64    `json:"cost_micros"`
}

// usage is GET /api/v1/usage?by=bot|thread|day|model (default day), over the model
// calls recorded since ?since= (default 30 days ago) and before ?until=, from
// the usage ledger. Rows are ordered by key (days and threads newest first) and
// paged by ?cursor= (the last key of the previous page; a cursor that is not
// a key of that kind, a date, a thread id or a bot handle, answers 400).
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	by := cmp.Or(q.str("by"), "day")
	if by != "bot" && by != "thread" && by != "day" && by != "model" {
		q.fail("by: want bot, thread, day or model, got %q", by)
	}
	since, until, cursor := q.time("since"), q.time("until"), q.str("cursor")
	if cursor != "" && !usageKeyOK(by, cursor) {
		q.fail("cursor: %q is not a %s key of this list", cursor, by)
	}
	if !q.ok(w) {
		return
	}
	if since.IsZero() {
		since = s.opts.Clock.Now().Add(-30 * 24 * time.Hour)
	}
	var (
		rows     map[string]*UsageRow
		threadOf map[string]core.ThreadID
	)
	ok := s.view(w, r, func(tx core.ReadTx) error {
		var err error
		rows, threadOf, err = ledgerUsage(tx, by, since, until)
		return err
	})
	if !ok {
		return
	}
	var all []UsageRow
	for _, row := range rows {
		all = append(all, *row)
	}
	less := func(a, b UsageRow) int { return cmpStr(a.Key, b.Key) }
	switch by {
	case "day":
		less = func(a, b UsageRow) int { return cmpStr(b.Key, a.Key) }
	case "thread":
		less = func(a, b UsageRow) int { return cmp.Compare(threadOf[b.Key], threadOf[a.Key]) }
	}
	slices.SortFunc(all, less)
	start := 0
	if cursor != "" { // the rows after the cursor's key, even when its row is gone
		if by == "thread" {
			id, _ := strconv.ParseUint(cursor, 10, 64)
			threadOf[cursor] = core.ThreadID(id)
		}
		at := UsageRow{Key: cursor}
		start = len(all)
		for i, row := range all {
			if less(at, row) < 0 {
				start = i
				break
			}
		}
	}
	all = all[start:]
	next := ""
	if len(all) > q.limit {
		all, next = all[:q.limit], all[q.limit-1].Key
	}
	writeJSON(w, http.StatusOK, page(all, next))
}

// usageKeyOK reports whether key is a well-formed row key of GET /api/v1/usage
// by by: a date (YYYY-MM-DD), a thread id, or a bot handle ([a-z0-9_]+).
func usageKeyOK(by, key string) bool {
	switch by {
	case "day":
		_, err := time.Parse(time.DateOnly, key)
		return err == nil
	case "thread":
		id, err := strconv.ParseUint(key, 10, 64)
		return err == nil && id > 0
	case "model":
		return strings.Contains(key, "/")
	default:
		return strings.Trim(key, "abcdefghijklmnopqrstuvwxyz0123456789_") == ""
	}
}
