package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"openbot/core"
)

// QuestionView is a question without its button token (a token answers the
// question from a platform, so it is not shown): what was asked, the tool and its
// arguments for an approval (with the warnings about the call and what it can
// reach), the shell command as it will run when it is a shell approval
// (core.Question.Command), and the decision with who made it, when and where.
type QuestionView struct {
	core.Question
	Token    string `json:"token,omitempty"` // always empty: the token is secret
	Command  string `json:"command,omitempty"`
	Decision string `json:"decision,omitempty"`
}

func questionView(q core.Question) QuestionView {
	q.Token = ""
	cmd, _ := q.Command()
	return QuestionView{Question: q, Command: cmd, Decision: q.Decision()}
}

// question is GET /api/v1/questions/{id}: one question, whole; approval prompts
// that cannot show a long command on a platform point here.
func (s *Server) question(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var q core.Question
	if s.view(w, r, func(tx core.ReadTx) (err error) {
		q, err = tx.Question(core.QuestionID(id))
		return err
	}) {
		writeJSON(w, http.StatusOK, questionView(q))
	}
}

// questions is GET /api/v1/questions: newest first, paged by ?cursor= (a
// question ID), ?status=pending|decided (default both).
func (s *Server) questions(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	cursor := core.QuestionID(q.uint("cursor"))
	status := q.str("status")
	if status != "" && status != "pending" && status != "decided" {
		q.fail("status: want pending or decided, got %q", status)
	}
	if !q.ok(w) {
		return
	}
	var all []core.Question
	if !s.view(w, r, func(tx core.ReadTx) (err error) {
		all, err = tx.Questions(status == "pending", 0)
		return err
	}) {
		return
	}
	slices.Reverse(all)
	var out []QuestionView
	next := ""
	for _, qu := range all {
		if cursor != 0 && qu.ID >= cursor || status == "decided" && qu.Status == core.QuestionPending {
			continue
		}
		if len(out) == q.limit {
			next = idCursor(uint64(out[len(out)-1].ID))
			break
		}
		out = append(out, questionView(qu))
	}
	writeJSON(w, http.StatusOK, page(out, next))
}

// AnswerRequest is the body of POST /api/v1/questions/{id}/answer: exactly one
// of Decision ("approve" or "reject", for approvals), Choice (index of an
// ask_human option) or Text (a free-text answer).
type AnswerRequest struct {
	Decision string `json:"decision,omitempty"`
	Choice   *int   `json:"choice,omitempty"`
	Text     string `json:"text,omitempty"`
}

// AdminAccount is the account recorded as where a console answer came from
// (Question.AnsweredVia and the activity line).
const AdminAccount core.AccountID = "admin/api"

// answer is POST /api/v1/questions/{id}/answer: the configured admin identity
// answers through Engine.Answer, under the same approver rules as a click in
// chat (DESIGN.md §5). 200 with the decided question; 400 for a bad body or
// choice; 403 when the identity may not answer it (or none is configured); 404
// for no such question; 409 when it was already decided (the body shows how).
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	if s.opts.Answerer == nil {
		writeError(w, http.StatusServiceUnavailable, "answering is not available on this server")
		return
	}
	if s.opts.Identity == "" {
		writeError(w, http.StatusForbidden, "no admin identity is configured: set admin.identity to the approver the console answers as")
		return
	}
	var req AnswerRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "body: want JSON {\"decision\":\"approve\"|\"reject\"} or {\"choice\":N} or {\"text\":\"...\"}: "+err.Error())
		return
	}
	a := core.Answer{Question: core.QuestionID(id), Choice: -1, Actor: s.opts.Identity, Name: s.opts.IdentityName, Account: AdminAccount}
	n := 0
	if req.Decision != "" {
		n++
		switch strings.ToLower(req.Decision) {
		case "approve":
			a.Choice = core.ChoiceApprove
		case "reject":
			a.Choice = core.ChoiceReject
		default:
			writeError(w, http.StatusBadRequest, "decision: want approve or reject, got "+req.Decision)
			return
		}
	}
	if req.Choice != nil {
		n++
		a.Choice = *req.Choice
	}
	if strings.TrimSpace(req.Text) != "" {
		n++
		a.Text = req.Text
	}
	if n != 1 {
		writeError(w, http.StatusBadRequest, "body: give exactly one of decision, choice or text")
		return
	}
	res, err := s.opts.Answerer.Answer(r.Context(), a)
	if err != nil {
		if errors.Is(err, core.ErrStopped) {
			writeError(w, http.StatusServiceUnavailable, "the engine is stopping")
			return
		}
		s.opts.Logger.Error("admin answer", "question", id, "err", core.Redact(err.Error()))
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	switch res.Outcome {
	case core.AnswerAccepted:
		writeJSON(w, http.StatusOK, questionView(res.Question))
	case core.AnswerDecided:
		writeJSON(w, http.StatusConflict, map[string]any{"error": "already decided", "question": questionView(res.Question)})
	case core.AnswerForbidden:
		writeError(w, http.StatusForbidden, string(s.opts.Identity)+" may not answer this question: only an owner or one of its approvers (the tool's, else the bot's, else the global ones) may, and not the person who asked unless self_approve is on; make the console's identity an owner (owners: in the config) or an approver")
	default:
		if res.Question.ID == 0 {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		writeError(w, http.StatusBadRequest, "that answer does not fit the question: approvals take approve or reject, questions with options a choice, free-text questions text")
	}
}
