package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/admin/web"
	"openbot/core"
	"openbot/store/bolt"
)

// TestApprovalsList lists the audit from the store: every question with its
// decision, who made it, through which account, and the argument hash.
func TestApprovalsList(t *testing.T) {
	dir := t.TempDir()
	path := exampleConfig(t, dir)
	st, err := bolt.Open(filepath.Join(dir, "data", "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	err = st.Update(context.Background(), func(tx core.Tx) error {
		if _, err := tx.PutQuestion(core.Question{Token: "aaaaaaaaaaaa", Kind: core.QuestionApproval, Run: 1, Bot: "bot:engineer", Thread: 3,
			Tool: "shell", Args: json.RawMessage(`{"command":"ls"}`), ArgsHash: "0123456789abcdef0123", Status: core.QuestionAnswered,
			Choice: core.ChoiceApprove, AnsweredBy: "slack:T1:U1", AnsweredByName: "Alice", AnsweredVia: "slack/acme", AnsweredAt: at, Created: at,
			Outcome: core.OutcomeRan}); err != nil {
			return err
		}
		if _, err := tx.PutQuestion(core.Question{Token: "cccccccccccc", Kind: core.QuestionApproval, Run: 5, Bot: "bot:engineer", Thread: 3,
			Tool: "alpha__count", Args: json.RawMessage(`{}`), ArgsHash: "fedcba9876543210", Status: core.QuestionAnswered,
			Choice: core.ChoiceApprove, AnsweredBy: "slack:T1:U1", AnsweredByName: "Alice", AnsweredAt: at, Created: at,
			Outcome: "not run: MCP server alpha is not available: it exited with status 2"}); err != nil {
			return err
		}
		_, err := tx.PutQuestion(core.Question{Token: "bbbbbbbbbbbb", Kind: core.QuestionAsk, Run: 2, Bot: "bot:qa", Thread: 4,
			Text: "Which environment?", Status: core.QuestionPending, Choice: -1, Created: at, Expires: at.Add(24 * time.Hour)})
		return err
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "k"}
	r := runFor(t, []string{"approvals", "list", "--config", path}, nil, env)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"Approved by Alice", "slack:T1:U1", "slack/acme", "0123456789abcdef", "shell", "ask: Which environment?", "waiting until 2026-12-01T09:00:00Z",
		"OUTCOME", "  ran\n", "alpha__count", "not run: MCP server alpha is not available: it exited with status 2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runFor(t, []string{"approvals", "list", "--pending", "--config", path}, nil, env)
	if strings.Contains(r.stdout, "Alice") || !strings.Contains(r.stdout, "Which environment?") {
		t.Errorf("--pending lists:\n%s", r.stdout)
	}
}

// TestApprovalsHandler: the audit endpoint answers only the admin bearer token,
// whatever the peer's address (a loopback peer without it is refused), names its
// store, and leaves out button tokens. With no admin.token it is off (404).
func TestApprovalsHandler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openbot.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(context.Background(), func(tx core.Tx) error {
		_, err := tx.PutQuestion(core.Question{Token: "secrettoken1", Kind: core.QuestionAsk, Run: 1, Bot: "bot:qa", Thread: 1, Status: core.QuestionPending})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(core.Options{Store: st, Agent: benchAgent{}, Bots: []core.BotProfile{{Handle: "qa"}}})
	if err != nil {
		t.Fatal(err)
	}
	const token = "admin-token-0123456789"
	on := web.New(web.Options{Token: token}).Bearer(approvalsHandler(eng, path, slog.New(slog.DiscardHandler)))
	off := web.New(web.Options{}).Bearer(approvalsHandler(eng, path, slog.New(slog.DiscardHandler)))
	for _, tc := range []struct {
		name, remote, auth string
		h                  http.Handler
		code               int
	}{
		{"no token configured", "127.0.0.1:5555", "Bearer " + token, off, 404},
		{"loopback without token", "127.0.0.1:5555", "", on, 401},
		{"ipv6 loopback without token", "[::1]:5555", "", on, 401},
		{"wrong token", "127.0.0.1:5555", "Bearer admin-token-0123456788", on, 401},
		{"short wrong token", "127.0.0.1:5555", "Bearer x", on, 401},
		{"basic auth", "127.0.0.1:5555", "Basic " + token, on, 401},
		{"right token from afar", "203.0.113.9:5555", "Bearer " + token, on, 200},
		{"right token, lower-case scheme", "127.0.0.1:5555", "bearer " + token, on, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/approvals?pending=1", nil)
			req.RemoteAddr = tc.remote
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d", rec.Code, tc.code)
			}
			switch tc.code {
			case 200:
				var body approvalsBody
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Store != path || len(body.Questions) != 1 {
					t.Errorf("body = %s (%v)", rec.Body.String(), err)
				}
				if strings.Contains(rec.Body.String(), "secrettoken1") {
					t.Error("the button token was served")
				}
			case 401:
				if rec.Body.String() != "unauthorized\n" {
					t.Errorf("401 body = %q, want no detail", rec.Body.String())
				}
			default:
				if strings.Contains(rec.Body.String(), "qa") || strings.Contains(rec.Body.String(), path) {
					t.Errorf("refusal reveals the audit: %q", rec.Body.String())
				}
			}
		})
	}
}
