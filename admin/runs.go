package admin

import (
	"net/http"
	"time"

	"openbot/core"
)

// RunSummary is a run without its checkpoint (the transcript stays in the store):
// status, bot, thread, triggers, usage, duration and error.
type RunSummary struct {
	ID       core.RunID       `json:"id"`
	Bot      core.ActorID     `json:"bot"`
	Thread   core.ThreadID    `json:"thread"`
	Status   core.RunStatus   `json:"status"`
	Triggers []core.MessageID `json:"triggers"`
	Error    string           `json:"error,omitempty"`
	Usage    core.Usage       `json:"usage"`
	Question core.QuestionID  `json:"question,omitempty"`
	Created  time.Time        `json:"created"`
	Started  time.Time        `json:"started,omitzero"`
	Ended    time.Time        `json:"ended,omitzero"`
	// DurationMS is Ended-Started, or now-Started while the run is not over
	// (milliseconds; 0 before it starts).
	DurationMS int64 `json:"duration_ms"`
}

func runSummary(r core.Run, now time.Time) RunSummary {
	s := RunSummary{ID: r.ID, Bot: r.Bot, Thread: r.Thread, Status: r.Status, Triggers: r.Triggers, Error: core.Redact(r.Error),
		Usage: r.Usage, Question: r.Question, Created: r.Created, Started: r.Started, Ended: r.Ended}
	if s.Triggers == nil {
		s.Triggers = []core.MessageID{}
	}
	switch {
	case r.Started.IsZero():
	case !r.Ended.IsZero():
		s.DurationMS = r.Ended.Sub(r.Started).Milliseconds()
	case !r.Status.Terminal():
		s.DurationMS = now.Sub(r.Started).Milliseconds()
	}
	return s
}

// listRuns pages runs newest first from before (0: the newest), keeping those
// keep accepts, reading at most scanBudget runs; next is "" when no run is left.
func listRuns(tx core.ReadTx, before core.RunID, limit int, keep func(core.Run) bool, now time.Time) ([]RunSummary, string, error) {
	var out []RunSummary
	scanned := 0
	for {
		batch, err := tx.RunsBefore(before, 100)
		if err != nil || len(batch) == 0 {
			return out, "", err
		}
		for _, r := range batch {
			before, scanned = r.ID, scanned+1
			if keep(r) {
				out = append(out, runSummary(r, now))
				if len(out) == limit {
					break
				}
			}
		}
		if before == 1 {
			return out, "", nil
		}
		if len(out) == limit || scanned >= scanBudget {
			return out, idCursor(uint64(before)), nil
		}
	}
}

// runs is GET /api/v1/runs: newest first, paged by ?cursor= (a run ID), filtered
// by ?thread=, ?bot= and ?status=.
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	cursor, thread := core.RunID(q.uint("cursor")), core.ThreadID(q.uint("thread"))
	bot, status := q.bot("bot"), core.RunStatus(q.str("status"))
	if !q.ok(w) {
		return
	}
	keep := func(run core.Run) bool {
		return (thread == 0 || run.Thread == thread) && (bot == "" || run.Bot == bot) && (status == "" || run.Status == status)
	}
	var out []RunSummary
	var next string
	if s.view(w, r, func(tx core.ReadTx) (err error) {
		out, next, err = listRuns(tx, cursor, q.limit, keep, s.opts.Clock.Now())
		return err
	}) {
		writeJSON(w, http.StatusOK, page(out, next))
	}
}

// RunDetail is GET /api/v1/runs/{id}: the run, its timeline folded from its run
// events, and its questions.
type RunDetail struct {
	RunSummary
	Timeline  []Step         `json:"timeline"`
	Questions []QuestionView `json:"questions"`
	// Currency names the unit of the model calls' cost_micros.
	Currency string `json:"currency,omitempty"`
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var d RunDetail
	if s.view(w, r, func(tx core.ReadTx) error {
		d = RunDetail{} // fn may run again (core.Store.View)
		run, err := tx.Run(core.RunID(id))
		if err != nil {
			return err
		}
		d.RunSummary = runSummary(run, s.opts.Clock.Now())
		events, err := tx.RunEvents(run.ID)
		if err != nil {
			return err
		}
		qs, err := tx.Questions(false, 0)
		if err != nil {
			return err
		}
		byID := map[core.QuestionID]core.Question{}
		for _, q := range qs {
			if q.Run == run.ID {
				byID[q.ID] = q
				d.Questions = append(d.Questions, questionView(q))
			}
		}
		d.Timeline = Fold(events, byID)
		costs, err := runCosts(tx, run)
		if err != nil {
			return err
		}
		call := 0
		for i := range d.Timeline {
			if d.Timeline[i].Kind == "model_call" {
				call++
				if c, ok := costs[call]; ok {
					d.Timeline[i].CostMicros = &c
				}
			}
		}
		return nil
	}) {
		if d.Questions == nil {
			d.Questions = []QuestionView{}
		}
		d.Currency = "USD"
		if s.opts.Cost != nil && s.opts.Cost().Currency != "" {
			d.Currency = s.opts.Cost().Currency
		}
		writeJSON(w, http.StatusOK, d)
	}
}
