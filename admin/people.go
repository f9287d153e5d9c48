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

// PeopleKeeper keeps the people who may talk to the bots (core/people.go);
// *core.Engine implements it. Each call is one store transaction recorded in
// the activity log.
type PeopleKeeper interface {
	People(ctx context.Context) ([]core.Person, []core.Pairing, error)
	Pair(ctx context.Context, req core.PairRequest) (core.Person, error)
	Revoke(ctx context.Context, ref string, by core.By) (core.Person, error)
	AddOwner(ctx context.Context, actor core.ActorID, name string, by core.By) (core.Person, error)
	Policies(ctx context.Context) (map[string]core.ChannelPolicy, error)
	SetPolicy(ctx context.Context, acct core.AccountID, channel string, p core.ChannelPolicy, by core.By) (core.ChannelPolicy, error)
	RemovePolicy(ctx context.Context, acct core.AccountID, channel string, by core.By) (core.ChannelPolicy, error)
}

// peopleRoutes: GET /api/v1/people (people and pending pairing codes), POST
// /api/v1/people/pair {"code"} (let in the person a code was given to, as the
// console's identity, which must be an owner), POST /api/v1/people/owners
// {"id","name"} (make an owner), DELETE /api/v1/people/{id} (remove a person),
// GET, PUT and DELETE /api/v1/policies (channel policies).
func (s *Server) peopleRoutes() {
	s.mux.HandleFunc("GET /api/v1/people", s.listPeople)
	s.mux.HandleFunc("POST /api/v1/people/pair", s.pair)
	s.mux.HandleFunc("POST /api/v1/people/owners", s.addOwner)
	s.mux.HandleFunc("DELETE /api/v1/people/{id}", s.revoke)
	s.mux.HandleFunc("GET /api/v1/policies", s.listPolicies)
	s.mux.HandleFunc("PUT /api/v1/policies", s.setPolicy)
	s.mux.HandleFunc("DELETE /api/v1/policies", s.removePolicy)
}

// listPolicies is GET /api/v1/policies: the stored channel policies by
// "<account> <channel>" (the configured ones are in the config file).
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	pols, err := k.Policies(r.Context())
	if pols == nil {
		pols = map[string]core.ChannelPolicy{}
	}
	s.answerPeople(w, "policies", pols, err)
}

// policyTarget reads the account and channel of a policy request; a missing
// one is answered 400.
func policyTarget(w http.ResponseWriter, r *http.Request) (acct, channel string, ok bool) {
	acct, channel = r.URL.Query().Get("account"), r.URL.Query().Get("channel")
	if acct == "" || channel == "" {
		writeError(w, http.StatusBadRequest, "account and channel are required (channel \"*\" is the account's default)")
		return "", "", false
	}
	return acct, channel, true
}

// setPolicy is PUT /api/v1/policies?account=A&channel=C with a ChannelPolicy
// body: it replaces the channel's policy ("*" for the account's default), as
// the console's identity, which must be an owner (403); a bad policy is 400.
func (s *Server) setPolicy(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	acct, channel, ok := policyTarget(w, r)
	if !ok {
		return
	}
	var p core.ChannelPolicy
	if !decodeSmall(w, r, &p) {
		return
	}
	p, err := k.SetPolicy(r.Context(), core.AccountID(acct), channel, p, s.by())
	s.answerPeople(w, "set policy", p, err)
}

// removePolicy is DELETE /api/v1/policies?account=A&channel=C: it removes the
// channel's stored policy, so the configured one applies again, as the
// console's identity, which must be an owner (403); 404 when none is stored.
// It answers the policy removed.
func (s *Server) removePolicy(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	acct, channel, ok := policyTarget(w, r)
	if !ok {
		return
	}
	p, err := k.RemovePolicy(r.Context(), core.AccountID(acct), channel, s.by())
	s.answerPeople(w, "remove policy", p, err)
}

// PeopleView is GET /api/v1/people.
type PeopleView struct {
	People  []core.Person  `json:"people"`
	Pending []core.Pairing `json:"pending"`
}

func (s *Server) keeper(w http.ResponseWriter) (PeopleKeeper, bool) {
	if s.opts.People == nil {
		writeError(w, http.StatusServiceUnavailable, "people are not kept by this server")
		return nil, false
	}
	return s.opts.People, true
}

// answerPeople answers v (200), or maps err: a refusal to 403 (not an owner),
// 404 (no such code, person or policy) or 400 (a bad policy), anything else to
// 500 (logged, not shown). what names the call in the log.
func (s *Server) answerPeople(w http.ResponseWriter, what string, v any, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, core.ErrNotOwner):
		writeError(w, http.StatusForbidden, string(s.by().Actor)+": "+err.Error()+"; make the console's identity an owner (owners: in the config)")
	case errors.Is(err, core.ErrPairingCode), errors.Is(err, core.ErrNoPerson), errors.Is(err, core.ErrNoPolicy):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, core.ErrBadPolicy):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		s.opts.Logger.Error("admin "+what, "err", core.Redact(err.Error()))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

func (s *Server) listPeople(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	people, pending, err := k.People(r.Context())
	s.answerPeople(w, "people", PeopleView{People: nonNil(people), Pending: nonNil(pending)}, err)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// decodeSmall reads a small JSON body into v; false (after a 400) when it does
// not decode.
func decodeSmall(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return false
	}
	return true
}

func (s *Server) pair(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	var body struct {
		Code string `json:"code"`
	}
	if !decodeSmall(w, r, &body) {
		return
	}
	p, err := k.Pair(r.Context(), core.PairRequest{Code: body.Code, By: s.by()})
	s.answerPeople(w, "pair", p, err)
}

func (s *Server) addOwner(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	var body struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if !decodeSmall(w, r, &body) {
		return
	}
	if _, rest, ok := strings.Cut(body.ID, ":"); !ok || rest == "" {
		writeError(w, http.StatusBadRequest, "id must be an actor id like slack:T012:U345, telegram:123456, feishu:ou_abc")
		return
	}
	p, err := k.AddOwner(r.Context(), core.ActorID(body.ID), body.Name, s.by())
	s.answerPeople(w, "add owner", p, err)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keeper(w)
	if !ok {
		return
	}
	p, err := k.Revoke(r.Context(), r.PathValue("id"), s.by())
	s.answerPeople(w, "revoke", p, err)
}
