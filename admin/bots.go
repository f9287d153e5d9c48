package admin

import (
	"net/http"
	"slices"
	"time"

	"openbot/core"
)

// Bot statuses of GET /api/v1/bots.
const (
	BotIdle    = "idle"
	BotWorking = "working" // a run of the bot is running (Threads says where)
	BotWaiting = "waiting" // not working, but a run waits for a person
)

// BotView is what a bot does now: its status, the threads it works in and the
// threads parked on its questions, how many items wait in its mailbox, its
// current runs, and its usage since midnight UTC.
type BotView struct {
	Handle string `json:"handle"`
	Name   string `json:"name"`
	LLM    string `json:"llm,omitempty"`
	// Fallbacks are the backup llm profiles of the bot's chain, in order.
	Fallbacks []string        `json:"fallbacks,omitempty"`
	Model     string          `json:"model,omitempty"`
	Status    string          `json:"status"`
	Working   []core.ThreadID `json:"working_threads"`
	// Parked are threads waiting for a person's answer to this bot's question.
	Parked     []core.ThreadID `json:"parked_threads"`
	QueueDepth int             `json:"queue_depth"`
	Current    []RunSummary    `json:"current_runs"`
	UsageToday core.Usage      `json:"usage_today"`
	RunsToday  int             `json:"runs_today"`
	// Paused is set while the bot is paused (it starts no run; its mailbox
	// keeps filling), with who paused it and when.
	Paused *core.PauseInfo `json:"paused,omitempty"`
	// FixedPromptTokens is the bot's fixed prompt (instructions and tool
	// schemas) in tokens, sent with every model call; 0 when not known.
	// FixedPromptLarge says it is above the configured warning size.
	FixedPromptTokens int  `json:"fixed_prompt_tokens,omitempty"`
	FixedPromptLarge  bool `json:"fixed_prompt_large,omitempty"`
}

// bots is GET /api/v1/bots: ordered by handle, paged by ?cursor= (the last
// handle of the previous page).
func (s *Server) bots(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	cursor := q.str("cursor")
	if !q.ok(w) {
		return
	}
	now := s.opts.Clock.Now()
	var out []BotView
	next := ""
	ok := s.view(w, r, func(tx core.ReadTx) error {
		out, next = nil, "" // fn may run again (core.Store.View)
		bots := slices.Clone(s.opts.Bots)
		if len(bots) == 0 {
			var err error
			if bots, err = tx.Bots(); err != nil {
				return err
			}
		}
		slices.SortFunc(bots, func(a, b core.BotProfile) int { return cmpStr(a.Handle, b.Handle) })
		views := map[core.ActorID]*BotView{}
		for _, b := range bots {
			if cursor != "" && b.Handle <= cursor {
				continue
			}
			if len(out) == q.limit {
				next = out[len(out)-1].Handle
				break
			}
			v := BotView{Handle: b.Handle, Name: b.Name, LLM: b.LLM, Fallbacks: b.Fallbacks, Model: b.Model, Status: BotIdle,
				Working: []core.ThreadID{}, Parked: []core.ThreadID{}, Current: []RunSummary{}}
			if s.opts.FixedPrompt != nil {
				v.FixedPromptTokens = s.opts.FixedPrompt(b)
				v.FixedPromptLarge = s.opts.FixedPromptWarn > 0 && v.FixedPromptTokens > s.opts.FixedPromptWarn
			}
			out = append(out, v)
		}
		for i := range out {
			views[core.BotActorID(out[i].Handle)] = &out[i]
		}
		return botState(tx, views, now)
	})
	if ok {
		writeJSON(w, http.StatusOK, page(out, next))
	}
}

// botState fills pause, status, runs, queue depth and today's usage of views.
func botState(tx core.ReadTx, views map[core.ActorID]*BotView, now time.Time) error {
	for _, v := range views {
		info, paused, err := core.PausedTx(tx, v.Handle)
		if err != nil {
			return err
		}
		if paused {
			v.Paused = &info
		}
	}
	running, err := tx.RunsByStatus(core.RunRunning)
	if err != nil {
		return err
	}
	for _, r := range running {
		if v := views[r.Bot]; v != nil {
			v.Status = BotWorking
			v.Working = append(v.Working, r.Thread)
			v.Current = append(v.Current, runSummary(r, now))
		}
	}
	waiting, err := tx.RunsByStatus(core.RunWaitingHuman)
	if err != nil {
		return err
	}
	for _, r := range waiting {
		if v := views[r.Bot]; v != nil {
			if v.Status == BotIdle {
				v.Status = BotWaiting
			}
			v.Parked = append(v.Parked, r.Thread)
		}
	}
	queued, err := tx.ItemsByStatus(core.ItemQueued)
	if err != nil {
		return err
	}
	for _, it := range queued {
		if v := views[it.Actor]; v != nil {
			v.QueueDepth++
		}
	}
	midnight := now.UTC().Truncate(24 * time.Hour)
	var before core.RunID
	for {
		batch, err := tx.RunsBefore(before, 200)
		if err != nil || len(batch) == 0 {
			return err
		}
		for _, r := range batch {
			if r.Created.Before(midnight) {
				return nil
			}
			before = r.ID
			if v := views[r.Bot]; v != nil {
				v.UsageToday = v.UsageToday.Add(r.Usage)
				v.RunsToday++
			}
		}
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
