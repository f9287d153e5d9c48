package admin

import (
	"net/http"
	"strings"
	"time"

	"openbot/core"
)

// ThreadSummary is one row of GET /api/v1/threads.
type ThreadSummary struct {
	ID           core.ThreadID  `json:"id"`
	Key          string         `json:"key"`
	Title        string         `json:"title,omitempty"`
	DefaultBot   core.ActorID   `json:"default_bot,omitempty"`
	Platforms    []string       `json:"platforms"`
	Participants []core.ActorID `json:"participants"`
	Messages     int            `json:"messages"`
	// PendingQuestions counts questions of the thread still waiting for a person.
	PendingQuestions int       `json:"pending_questions"`
	Created          time.Time `json:"created"`
	// Updated is when its newest message was posted (Created when it has none).
	Updated time.Time `json:"updated"`
}

// threads is GET /api/v1/threads: newest first, paged by ?cursor= (a thread ID),
// filtered by ?platform=, ?bot= (a participant), ?pending=1 (has a pending
// question), ?since= (updated at or after) and ?q= (case-insensitive text in the
// title, key or any message).
func (s *Server) threads(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	cursor := core.ThreadID(q.uint("cursor"))
	platform, bot, since := q.str("platform"), q.bot("bot"), q.time("since")
	pendingOnly := q.str("pending") != ""
	text := strings.ToLower(strings.TrimSpace(q.str("q")))
	if !q.ok(w) {
		return
	}
	var out []ThreadSummary
	var next string
	ok := s.view(w, r, func(tx core.ReadTx) error {
		out, next = nil, "" // fn may run again (core.Store.View)
		pending, err := pendingByThread(tx)
		if err != nil {
			return err
		}
		scanned := 0
		before := cursor
		for {
			batch, err := tx.ThreadsBefore(before, 100)
			if err != nil {
				return err
			}
			for _, t := range batch {
				before, scanned = t.ID, scanned+1
				if platform != "" && !hasPlatform(t, platform) || bot != "" && !t.HasParticipant(bot) || pendingOnly && pending[t.ID] == 0 {
					continue
				}
				sum, err := summarize(tx, t, pending[t.ID])
				if err != nil {
					return err
				}
				if !since.IsZero() && sum.Updated.Before(since) {
					continue
				}
				if text != "" {
					if found, err := threadHasText(tx, t, text); err != nil || !found {
						if err != nil {
							return err
						}
						continue
					}
				}
				out = append(out, sum)
				if len(out) == q.limit {
					break
				}
			}
			switch {
			case len(batch) == 0 || before == 1:
				return nil
			case len(out) == q.limit || scanned >= scanBudget:
				next = idCursor(uint64(before))
				return nil
			}
		}
	})
	if ok {
		writeJSON(w, http.StatusOK, page(out, next))
	}
}

func pendingByThread(tx core.ReadTx) (map[core.ThreadID]int, error) {
	qs, err := tx.Questions(true, 0)
	out := make(map[core.ThreadID]int, len(qs))
	for _, q := range qs {
		out[q.Thread]++
	}
	return out, err
}

func hasPlatform(t core.Thread, platform string) bool {
	for _, b := range t.Bindings {
		if b.Platform == platform {
			return true
		}
	}
	return false
}

func summarize(tx core.ReadTx, t core.Thread, pending int) (ThreadSummary, error) {
	sum := ThreadSummary{ID: t.ID, Key: t.Key, Title: t.Title, DefaultBot: t.DefaultBot, Participants: t.Participants,
		PendingQuestions: pending, Created: t.Created, Updated: t.Created, Platforms: []string{}}
	if sum.Participants == nil {
		sum.Participants = []core.ActorID{}
	}
	for _, b := range t.Bindings {
		if !containsStr(sum.Platforms, b.Platform) {
			sum.Platforms = append(sum.Platforms, b.Platform)
		}
	}
	n, err := tx.CountMessages(t.ID)
	if err != nil {
		return sum, err
	}
	sum.Messages = n
	last, err := tx.MessagesBefore(t.ID, 0, 1)
	if err != nil {
		return sum, err
	}
	if len(last) == 1 {
		sum.Updated = last[0].Created
	}
	return sum, nil
}

// threadHasText looks for text (lower case) in the title, key and messages.
func threadHasText(tx core.ReadTx, t core.Thread, text string) (bool, error) {
	if strings.Contains(strings.ToLower(t.Title+" "+t.Key), text) {
		return true, nil
	}
	var after core.MessageID
	for {
		ms, err := tx.Messages(t.ID, after, 200)
		if err != nil || len(ms) == 0 {
			return false, err
		}
		for _, m := range ms {
			if strings.Contains(strings.ToLower(m.Text), text) {
				return true, nil
			}
			after = m.ID
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ThreadDetail is GET /api/v1/threads/{id}: the thread with its bindings,
// participants (with names), each bot's todo list, its runs (newest first, at
// most 100) and its first page of messages (oldest first; more through
// /threads/{id}/messages?after=).
type ThreadDetail struct {
	ThreadSummary
	Bindings     []core.Binding             `json:"bindings"`
	People       []Participant              `json:"people"`
	Todos        map[string][]core.TodoItem `json:"todos"`
	Runs         []RunSummary               `json:"runs"`
	MessagesPage Page[MessageView]          `json:"messages_page"`
}

// Participant is an actor of a thread with its display name.
type Participant struct {
	ID   core.ActorID   `json:"id"`
	Kind core.ActorKind `json:"kind,omitempty"`
	Name string         `json:"name,omitempty"`
}

// MessageView is a message as the console shows it: sender, time, text (capped),
// the platform ids it came in with, and the run that wrote it.
type MessageView struct {
	ID         core.MessageID   `json:"id"`
	Thread     core.ThreadID    `json:"thread"`
	Sender     core.ActorID     `json:"sender"`
	SenderName string           `json:"sender_name"`
	Text       string           `json:"text"`
	Mentions   []string         `json:"mentions,omitempty"`
	Kind       core.MessageKind `json:"kind,omitempty"`
	Hop        int              `json:"hop"`
	Run        core.RunID       `json:"run,omitempty"`
	Origin     *core.Origin     `json:"origin,omitempty"`
	Created    time.Time        `json:"created"`
	// Covers is, on a summary (Kind "summary"), the newest message it stands for.
	Covers core.MessageID `json:"covers,omitempty"`
}

func messageView(m core.Message) MessageView {
	return MessageView{ID: m.ID, Thread: m.Thread, Sender: m.Sender, SenderName: m.SenderName, Text: capText(m.Text, textCap),
		Mentions: m.Mentions, Kind: m.Kind, Hop: m.Hop, Run: m.Run, Origin: m.Origin, Created: m.Created, Covers: m.Covers}
}

func (s *Server) thread(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var d ThreadDetail
	ok = s.view(w, r, func(tx core.ReadTx) error {
		d = ThreadDetail{} // fn may run again (core.Store.View)
		t, err := tx.Thread(core.ThreadID(id))
		if err != nil {
			return err
		}
		pending, err := pendingByThread(tx)
		if err != nil {
			return err
		}
		if d.ThreadSummary, err = summarize(tx, t, pending[t.ID]); err != nil {
			return err
		}
		d.Bindings, d.Todos = t.Bindings, map[string][]core.TodoItem{}
		for _, p := range t.Participants {
			part := Participant{ID: p}
			if a, err := tx.Actor(p); err == nil {
				part.Kind, part.Name = a.Kind, a.Name
			}
			d.People = append(d.People, part)
			if todo, err := tx.Todo(p, t.ID); err != nil {
				return err
			} else if len(todo) > 0 {
				d.Todos[string(p)] = todo
			}
		}
		if d.Runs, _, err = listRuns(tx, 0, 100, func(run core.Run) bool { return run.Thread == t.ID }, s.opts.Clock.Now()); err != nil {
			return err
		}
		d.Runs = nonNil(d.Runs) // a thread no run has touched: [] for clients, not null
		d.MessagesPage, err = messagesPage(tx, t.ID, 0, DefaultLimit)
		return err
	})
	if ok {
		if d.Bindings == nil {
			d.Bindings = []core.Binding{}
		}
		if d.People == nil {
			d.People = []Participant{}
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// threadMessages is GET /api/v1/threads/{id}/messages?cursor=&limit=, oldest
// first; the cursor (also accepted as ?after=) is the last message ID seen.
func (s *Server) threadMessages(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	q := newQuery(r)
	after := core.MessageID(q.uint("after"))
	if after == 0 {
		after = core.MessageID(q.uint("cursor")) // Next of a page, as on every list
	}
	if !q.ok(w) {
		return
	}
	var p Page[MessageView]
	if s.view(w, r, func(tx core.ReadTx) (err error) {
		if _, err = tx.Thread(core.ThreadID(id)); err != nil {
			return err
		}
		p, err = messagesPage(tx, core.ThreadID(id), after, q.limit)
		return err
	}) {
		writeJSON(w, http.StatusOK, p)
	}
}

// messagesPage reads limit+1 to know whether a next page exists.
func messagesPage(tx core.ReadTx, thread core.ThreadID, after core.MessageID, limit int) (Page[MessageView], error) {
	ms, err := tx.Messages(thread, after, limit+1)
	if err != nil {
		return Page[MessageView]{}, err
	}
	var out []MessageView
	next := ""
	for i, m := range ms {
		if i == limit {
			next = idCursor(uint64(ms[i-1].ID))
			break
		}
		out = append(out, messageView(m))
	}
	return page(out, next), nil
}
