// Package admin is the operator console's API (DESIGN.md §10): JSON reads of
// bots, threads, runs with their timelines, questions, the activity log and usage
// under /api/v1/, answering a question as the configured admin identity,
// steering (cancel a run, stop a bot's work in a thread, pause and resume a bot,
// each recorded in the activity log with that identity), and a
// live stream of what the store records (Server-Sent Events, resumable with
// Last-Event-ID).
//
// It reads through core.Store's read methods and answers through the engine, so
// the same approver rules apply as for a click in chat. It does no
// authentication itself: cmd/openbot mounts it behind the admin bearer token
// (DESIGN.md §9). Nothing secret leaves it: questions lose their button tokens
// and runs their checkpoints (transcripts); tool arguments are shown.
//
// core never imports this package; it uses net/http only.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"openbot/core"
)

// Answerer records an answer to a question; *core.Engine implements it.
type Answerer interface {
	Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error)
}

// Options configure a Server. Store is required.
type Options struct {
	Store core.Store
	// Answerer answers questions (the engine); nil makes the answer endpoint
	// answer 503.
	Answerer Answerer
	// Controller cancels runs, stops a thread's work and pauses bots (the
	// engine); nil makes those endpoints answer 503.
	Controller Controller
	// People keeps who may talk to the bots (the engine); nil makes the
	// people endpoints answer 503.
	People PeopleKeeper
	// Identity is the actor the console answers and steers as ("slack:T1:U1"); the answer
	// is subject to the same approver rules as a click by that person
	// (DESIGN.md §5). Empty: answers are refused with 403.
	Identity core.ActorID
	// IdentityName is shown in decisions ("Approved by <name>"); default Identity.
	IdentityName string
	// Bots are the configured bots (Engine.Bots), listed by GET /api/v1/bots;
	// empty: the profiles stored in the store.
	Bots []core.BotProfile
	// FixedPrompt estimates a bot's fixed prompt in tokens (instructions and
	// tool schemas, agents.Agent.FixedPromptTokens), shown with each bot; nil
	// shows none. Above FixedPromptWarn tokens (when positive) it is flagged.
	FixedPrompt     func(core.BotProfile) int
	FixedPromptWarn int
	// StorePath is reported by GET /api/v1/ so a CLI can check it reached the
	// server of its own store.
	StorePath string
	// Notifier wakes event streams when the store commits; nil: they poll on
	// Tick only.
	Notifier *Notifier
	// Tick is how often an idle event stream reads the store without a hint
	// (default 2s); Heartbeat how often it writes a comment to keep proxies
	// from closing it (default 15s).
	Tick, Heartbeat time.Duration
	// MaxStreams bounds concurrent event streams (default 16); more get 503.
	MaxStreams int
	// Config, when set, serves GET /api/v1/config: the running configuration
	// with every secret masked and the last reload's report, as JSON. Nil: 404.
	Config func() any
	// Reload, when set, serves POST /api/v1/reload: it re-reads the
	// configuration file and applies it on behalf of by (the console's
	// identity, for the activity log), returning its report (every changed
	// key, applied or restart needed); an error is a refused file, answered
	// 422 with its problems. Nil: 404.
	Reload func(ctx context.Context, by core.By) (any, error)
	// Chat, when set, serves POST /api/v1/chat and GET
	// /api/v1/threads/{id}/draft: the dashboard's "try a bot" (admin/chat.go).
	Chat *Chat
	// Cost, when set, gives the current prices' currency and budgets, for GET
	// /api/v1/spend's budget bars; nil: no budgets, currency "USD".
	Cost func() core.Cost
	// Channels, when set, serves GET /api/v1/channels: each platform account's
	// state, last traffic, rate limits and delivery backlog, as JSON. Nil: 404.
	Channels func(ctx context.Context) (any, error)
	Clock    core.Clock
	Logger   *slog.Logger
}

// Defaults and limits of the API.
const (
	// DefaultLimit and MaxLimit bound a page of any list (?limit=).
	DefaultLimit = 50
	MaxLimit     = 500
	// scanBudget bounds how many records one filtered list request reads.
	scanBudget = 2000
	// textCap caps message texts and tool results in responses (characters).
	textCap = 4000
)

// Server serves the API. Safe for concurrent use.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	streams chan struct{}
	done    chan struct{} // closed by Shutdown: event streams end
	once    sync.Once
}

// Shutdown ends every event stream (they would otherwise keep an HTTP server's
// graceful shutdown waiting) and refuses new ones; other requests are served
// as before. Call it when the HTTP server starts shutting down
// (http.Server.RegisterOnShutdown). Safe to call more than once.
func (s *Server) Shutdown() { s.once.Do(func() { close(s.done) }) }

type sysClock struct{}

func (sysClock) Now() time.Time { return time.Now() }

// New checks opts and builds the routes. It does no I/O.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("admin: Options.Store is required")
	}
	if opts.Clock == nil {
		opts.Clock = sysClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Tick <= 0 {
		opts.Tick = 2 * time.Second
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 16
	}
	if opts.IdentityName == "" {
		opts.IdentityName = string(opts.Identity)
	}
	if opts.StorePath != "" {
		if abs, err := filepath.Abs(opts.StorePath); err == nil {
			opts.StorePath = abs
		}
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), streams: make(chan struct{}, opts.MaxStreams), done: make(chan struct{})}
	s.mux.HandleFunc("GET /api/v1/{$}", s.info)
	s.mux.HandleFunc("GET /api/v1/bots", s.bots)
	s.mux.HandleFunc("GET /api/v1/threads", s.threads)
	s.mux.HandleFunc("GET /api/v1/threads/{id}", s.thread)
	s.mux.HandleFunc("GET /api/v1/threads/{id}/messages", s.threadMessages)
	s.mux.HandleFunc("GET /api/v1/runs", s.runs)
	s.mux.HandleFunc("GET /api/v1/runs/{id}", s.run)
	s.mux.HandleFunc("GET /api/v1/questions", s.questions)
	s.mux.HandleFunc("GET /api/v1/questions/{id}", s.question)
	s.mux.HandleFunc("POST /api/v1/questions/{id}/answer", s.answer)
	s.mux.HandleFunc("POST /api/v1/runs/{id}/cancel", s.cancelRun)
	s.mux.HandleFunc("POST /api/v1/threads/{id}/stop", s.stopThread)
	s.mux.HandleFunc("POST /api/v1/bots/{handle}/pause", s.pauseBot(true))
	s.mux.HandleFunc("POST /api/v1/bots/{handle}/resume", s.pauseBot(false))
	s.mux.HandleFunc("GET /api/v1/activity", s.activity)
	s.mux.HandleFunc("GET /api/v1/usage", s.usage)
	s.mux.HandleFunc("GET /api/v1/spend", s.spend) // admin/spend.go
	s.mux.HandleFunc("GET /api/v1/schedules", s.schedules)
	s.mux.HandleFunc("GET /api/v1/events", s.events)
	s.memoryRoutes() // admin/memory.go
	s.configRoutes() // admin/config.go
	s.chatRoutes()   // admin/chat.go
	s.peopleRoutes() // admin/people.go
	s.mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s, nil
}

// ServeHTTP serves /api/v1/...; every answer is JSON (or an event stream) and
// is never cached.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// Info is GET /api/v1/: which store this server reads and where its event
// stream ends now (the cursor to start a stream that misses nothing from now).
type Info struct {
	Store  string `json:"store"`
	Events string `json:"events"`
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	var h core.LogHeads
	if !s.view(w, r, func(tx core.ReadTx) (err error) { h, err = tx.Heads(); return err }) {
		return
	}
	writeJSON(w, http.StatusOK, Info{Store: s.opts.StorePath, Events: cursorOf(h).String()})
}

// Page is one page of a list. Next is the cursor for the following page
// (?cursor=Next), "" when the list is exhausted; lists that follow a log
// forward (?after=) always return the cursor to poll with next.
type Page[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

func page[T any](items []T, next string) Page[T] {
	if items == nil {
		items = []T{}
	}
	return Page[T]{Items: items, Next: next}
}

// view runs fn in a read transaction and answers 500 (logged) on failure;
// it reports whether fn succeeded. A missing record answers 404.
func (s *Server) view(w http.ResponseWriter, r *http.Request, fn func(core.ReadTx) error) bool {
	return s.answered(w, r, s.opts.Store.View(r.Context(), fn))
}

// answered reports whether err is nil; otherwise it answers it: 404 for a
// missing record, nothing when the client went away, 500 (logged) else.
func (s *Server) answered(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, core.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found")
	case r.Context().Err() != nil:
		// the client went away; nothing to answer
	default:
		s.opts.Logger.Error("admin api", "path", r.URL.Path, "err", core.Redact(err.Error()))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// badRequest is a query parameter the API cannot use; its message names it.
type badRequest string

func (b badRequest) Error() string { return string(b) }

// query reads the list parameters every list shares.
type query struct {
	r     *http.Request
	limit int
	err   error
}

func newQuery(r *http.Request) *query {
	q := &query{r: r, limit: DefaultLimit}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			q.fail("limit: want a whole number from 1 to %d, got %q", MaxLimit, v)
		} else {
			q.limit = n
		}
	}
	return q
}

func (q *query) fail(format string, args ...any) {
	if q.err == nil {
		q.err = badRequest(fmt.Sprintf(format, args...))
	}
}

func (q *query) str(name string) string { return q.r.URL.Query().Get(name) }

// uint reads a non-negative integer parameter; absent is 0.
func (q *query) uint(name string) uint64 {
	v := q.str(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		q.fail("%s: want a whole number, got %q", name, v)
	}
	return n
}

// time reads an RFC 3339 time parameter; absent is the zero time.
func (q *query) time(name string) time.Time {
	v := q.str(name)
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		q.fail("%s: want an RFC 3339 time such as 2026-12-01T09:00:00Z, got %q", name, v)
	}
	return t
}

// bot reads a bot parameter given as a handle, "@handle" or "bot:handle".
func (q *query) bot(name string) core.ActorID {
	v := q.str(name)
	if v == "" {
		return ""
	}
	if len(v) > 4 && v[:4] == "bot:" {
		return core.ActorID(v)
	}
	if v[0] == '@' {
		v = v[1:]
	}
	return core.BotActorID(v)
}

// ok answers 400 with the first problem and reports false if there was one.
func (q *query) ok(w http.ResponseWriter) bool {
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return false
	}
	return true
}

// pathID reads the {id} path segment; a bad one answers 404.
func pathID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusNotFound, "not found")
		return 0, false
	}
	return id, true
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func idCursor(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 10)
}
