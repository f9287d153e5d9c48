package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"openbot/core"
)

// Controller steers the engine (DESIGN.md §10); *core.Engine implements it.
// Every call is one store transaction recorded in the activity log with By.
type Controller interface {
	CancelRun(ctx context.Context, id core.RunID, by core.By) (core.Run, error)
	StopQueued(ctx context.Context, bot string, thread core.ThreadID, by core.By) (core.Stopped, error)
	PauseBot(ctx context.Context, handle string, by core.By) error
	ResumeBot(ctx context.Context, handle string, by core.By) error
}

// ConsoleActor is recorded as who steered when no admin identity is configured.
const ConsoleActor core.ActorID = "admin:console"

// by is the identity the console steers as (ConsoleBy).
func (s *Server) by() core.By { return ConsoleBy(s.opts.Identity, s.opts.IdentityName) }

// ConsoleBy is who acts through the console and the admin token: identity
// (admin.identity) named name, else ConsoleActor ("the operator console"),
// through AdminAccount.
func ConsoleBy(identity core.ActorID, name string) core.By {
	if identity == "" {
		return core.By{Actor: ConsoleActor, Name: "the operator console", Via: AdminAccount}
	}
	return core.By{Actor: identity, Name: name, Via: AdminAccount}
}

// controller answers 503 when no engine steers this server.
func (s *Server) controller(w http.ResponseWriter) (Controller, bool) {
	if s.opts.Controller == nil {
		writeError(w, http.StatusServiceUnavailable, "steering is not available on this server")
		return nil, false
	}
	return s.opts.Controller, true
}

// controlFailed maps an engine error to a status: 404 for no such run, thread
// or bot, 503 while stopping, 500 (logged, not shown) otherwise.
func (s *Server) controlFailed(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrUnknownBot):
		writeError(w, http.StatusNotFound, "not found")
	case errors.Is(err, core.ErrStopped):
		writeError(w, http.StatusServiceUnavailable, "the engine is stopping")
	default:
		s.opts.Logger.Error("admin "+what, "err", core.Redact(err.Error()))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// cancelRun is POST /api/v1/runs/{id}/cancel: the run (running, queued or
// waiting for a person) ends cancelled, its model call and tool are
// interrupted and its thread is told who stopped it. 200 with the run; 404 for
// no such run; 409 when it already ended (the body shows it).
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	c, ok := s.controller(w)
	if !ok {
		return
	}
	run, err := c.CancelRun(r.Context(), core.RunID(id), s.by())
	switch {
	case errors.Is(err, core.ErrRunFinished):
		writeJSON(w, http.StatusConflict, map[string]any{"error": "run already ended", "run": runSummary(run, s.opts.Clock.Now())})
	case err != nil:
		s.controlFailed(w, "cancel run", err)
	default:
		writeJSON(w, http.StatusOK, runSummary(run, s.opts.Clock.Now()))
	}
}

// StopRequest is the body of POST /api/v1/threads/{id}/stop: the bot whose
// work in the thread stops.
type StopRequest struct {
	Bot string `json:"bot"`
}

// stopThread is POST /api/v1/threads/{id}/stop with {"bot":"<handle>"}: the
// bot's queued items in the thread are dropped and its runs there cancelled.
// 200 with what stopped; 400 for a bad body; 404 for no such thread or bot.
func (s *Server) stopThread(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var req StopRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.Bot) == "" {
		writeError(w, http.StatusBadRequest, "body: want JSON {\"bot\":\"<handle>\"}")
		return
	}
	c, ok := s.controller(w)
	if !ok {
		return
	}
	st, err := c.StopQueued(r.Context(), req.Bot, core.ThreadID(id), s.by())
	if err != nil {
		s.controlFailed(w, "stop thread", err)
		return
	}
	if st.Runs == nil {
		st.Runs = []core.RunID{}
	}
	writeJSON(w, http.StatusOK, st)
}

// PauseView is the answer of the pause and resume endpoints.
type PauseView struct {
	Handle string `json:"handle"`
	Paused bool   `json:"paused"`
}

// pauseBot is POST /api/v1/bots/{handle}/pause (on) and .../resume (off): a
// paused bot starts no run (its mailbox keeps filling) until resumed; stored,
// so a restart keeps it. 200; 404 for no such bot. Idempotent.
func (s *Server) pauseBot(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.controller(w)
		if !ok {
			return
		}
		handle := strings.ToLower(r.PathValue("handle"))
		f, what := c.ResumeBot, "resume bot"
		if on {
			f, what = c.PauseBot, "pause bot"
		}
		if err := f(r.Context(), handle, s.by()); err != nil {
			s.controlFailed(w, what, err)
			return
		}
		writeJSON(w, http.StatusOK, PauseView{Handle: handle, Paused: on})
	}
}
