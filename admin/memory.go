package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"openbot/core"
)

// The bots' memories (DESIGN.md §10 "Memory ... visible and editable from the
// console and the CLI", seed §9): list a bot's memories with the run behind
// each, show, edit and delete one. Edits are the operator's: the memory's
// source becomes "operator", its embedding is recomputed at the next search,
// and the activity log records the change with the console's identity.

// MemoryView is a memory as the API shows it: no embedding vector, only
// whether one is stored and under which model.
type MemoryView struct {
	ID             core.MemoryID `json:"id"`
	Bot            string        `json:"bot"`
	Text           string        `json:"text"`
	Created        time.Time     `json:"created"`
	Updated        time.Time     `json:"updated"`
	Source         string        `json:"source"`
	Run            core.RunID    `json:"run,omitempty"`
	EmbeddingModel string        `json:"embedding_model,omitempty"`
}

func memoryView(m core.Memory) MemoryView {
	v := MemoryView{ID: m.ID, Bot: m.Bot, Text: m.Text, Created: m.Created, Updated: m.Updated, Source: m.Source, Run: m.Run}
	if len(m.Embedding) > 0 {
		v.EmbeddingModel = m.EmbeddingModel
	}
	return v
}

// MemoryEdit is the body of PUT /api/v1/memories/{id}.
type MemoryEdit struct {
	Text string `json:"text"`
}

// memoryRoutes adds the memory endpoints.
func (s *Server) memoryRoutes() {
	s.mux.HandleFunc("GET /api/v1/bots/{handle}/memories", s.memories)
	s.mux.HandleFunc("GET /api/v1/memories/{id}", s.memory)
	s.mux.HandleFunc("PUT /api/v1/memories/{id}", s.editMemory)
	s.mux.HandleFunc("DELETE /api/v1/memories/{id}", s.deleteMemory)
}

// memories is GET /api/v1/bots/{handle}/memories: every memory of the bot,
// oldest first, in one page (a bot's memories are few; the page has no
// cursor). An unknown bot has none.
func (s *Server) memories(w http.ResponseWriter, r *http.Request) {
	handle := strings.ToLower(strings.TrimPrefix(r.PathValue("handle"), "@"))
	var out []MemoryView
	if !s.view(w, r, func(tx core.ReadTx) error {
		ms, err := tx.Memories(handle)
		out = make([]MemoryView, 0, len(ms))
		for _, m := range ms {
			out = append(out, memoryView(m))
		}
		return err
	}) {
		return
	}
	writeJSON(w, http.StatusOK, page(out, ""))
}

// memory is GET /api/v1/memories/{id}; 404 for none.
func (s *Server) memory(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var m core.Memory
	if !s.view(w, r, func(tx core.ReadTx) (err error) { m, err = tx.Memory(core.MemoryID(id)); return err }) {
		return
	}
	writeJSON(w, http.StatusOK, memoryView(m))
}

// editMemory is PUT /api/v1/memories/{id} with {"text": "..."}: 200 with the
// memory as stored; 400 for an empty or too long text (core.MaxMemoryChars);
// 404 for none.
func (s *Server) editMemory(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var req MemoryEdit
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.Text) == "" {
		writeError(w, http.StatusBadRequest, "body: want JSON {\"text\":\"<the memory>\"}")
		return
	}
	text := strings.TrimSpace(req.Text)
	if utf8.RuneCountInString(text) > core.MaxMemoryChars {
		writeError(w, http.StatusBadRequest, "text: longer than the limit of a memory")
		return
	}
	var m core.Memory
	s.update(w, r, func(tx core.Tx) error {
		cur, err := tx.Memory(core.MemoryID(id))
		if err != nil {
			return err
		}
		now := s.opts.Clock.Now()
		cur.Text, cur.Updated, cur.Source, cur.Run = text, now, core.MemorySourceOperator, 0
		cur.Embedding, cur.EmbeddingModel = nil, ""
		if m, err = tx.PutMemory(cur); err != nil {
			return err
		}
		return tx.AppendActivity(core.MemoryAudit("memory.updated", m, 0, s.memoryBy(), now))
	}, func() { writeJSON(w, http.StatusOK, memoryView(m)) })
}

// deleteMemory is DELETE /api/v1/memories/{id}: 200 with the memory as it
// was; 404 for none.
func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var m core.Memory
	s.update(w, r, func(tx core.Tx) error {
		var err error
		if m, err = tx.Memory(core.MemoryID(id)); err != nil {
			return err
		}
		if err := tx.DeleteMemory(m.ID); err != nil {
			return err
		}
		gone := m
		gone.Run = 0
		return tx.AppendActivity(core.MemoryAudit("memory.deleted", gone, 0, s.memoryBy(), s.opts.Clock.Now()))
	}, func() { writeJSON(w, http.StatusOK, memoryView(m)) })
}

// memoryBy names the console in the audit line.
func (s *Server) memoryBy() string {
	b := s.by()
	return "operator " + b.Name
}

// update runs fn in a write transaction and calls ok after it commits; 404
// for a missing record, 500 (logged) otherwise.
func (s *Server) update(w http.ResponseWriter, r *http.Request, fn func(core.Tx) error, ok func()) {
	if s.answered(w, r, s.opts.Store.Update(r.Context(), fn)) {
		ok()
	}
}
