package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"openbot/core"
)

// recordingHandler keeps every log record with its attributes (those added by
// Logger.With included); copies made by WithAttrs share the records.
type recordingHandler struct {
	shared *recordedLines
	pre    []slog.Attr
}

type recordedLines struct {
	mu    sync.Mutex
	lines []recordedLine
}

type recordedLine struct {
	level slog.Level
	text  string            // message and attributes, for leak checks
	attrs map[string]string // attributes by key
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	l := recordedLine{level: r.Level, attrs: map[string]string{}}
	for _, a := range h.pre {
		l.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	l.text = fmt.Sprintf("%s %v", r.Message, l.attrs)
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	h.shared.lines = append(h.shared.lines, l)
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{shared: h.shared, pre: append(append([]slog.Attr(nil), h.pre...), as...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (h *recordingHandler) all() []recordedLine {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return append([]recordedLine(nil), h.shared.lines...)
}

// TestRefusalsLogWarn: every malformed or refused request (a wrong secret token,
// a body that is not JSON, a DM from someone not allowed, a click on a button
// openbot did not make, a click the approver check refuses) leaves a WARN line
// naming the account, and no line carries the bot token or the secret token.
func TestRefusalsLogWarn(t *testing.T) {
	dm := func(user int64) []byte {
		b, _ := json.Marshal(map[string]any{"update_id": 5, "message": map[string]any{
			"message_id": 50, "date": 1767225660, "text": "hello",
			"from": map[string]any{"id": user, "is_bot": false, "first_name": "Mallory"},
			"chat": map[string]any{"id": user, "type": "private"},
		}})
		return b
	}
	forbidden := func(core.Answer) (core.AnswerResult, error) {
		return core.AnswerResult{Outcome: core.AnswerForbidden, Question: approval()}, nil
	}
	cases := []struct {
		name   string
		secret string
		body   []byte
		answer func(core.Answer) (core.AnswerResult, error)
	}{
		{"wrong secret token", "wrong", dm(aliceID), nil},
		{"missing secret token", "", dm(aliceID), nil},
		{"body is not JSON", hookSecret, []byte("{not json"), nil},
		{"unknown user in DM", hookSecret, dm(555), nil},
		{"button openbot did not make", hookSecret, clickUpdate("c1", aliceID, groupChat, "approve:run-17"), nil},
		{"click refused by the approver check", hookSecret, clickUpdate("c2", 555, groupChat, "q:"+qToken+":0"), forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			logs := &recordingHandler{shared: &recordedLines{}}
			o := e.options()
			o.Mode, o.Cursors = ModeWebhook, nil
			o.WebhookURL = "https://bridge.example.invalid/telegram/main/webhook"
			o.SecretToken = hookSecret
			o.Logger = slog.New(logs)
			a := e.adapter(t, o)
			e.eng.setAnswer(tc.answer)
			mux := http.NewServeMux()
			a.MountHTTP(mux)
			hs := httptest.NewServer(mux)
			t.Cleanup(hs.Close)
			run(t, a)
			started(t, e, a)
			post(t, hs.URL+WebhookPath("main"), tc.secret, tc.body)
			var warned bool
			for _, l := range logs.all() {
				if l.level >= slog.LevelWarn && l.attrs["account"] == "telegram/main" {
					warned = true
				}
				if strings.Contains(l.text, botToken) || strings.Contains(l.text, hookSecret) {
					t.Errorf("secret in log line %q", l.text)
				}
			}
			if !warned {
				t.Errorf("no WARN line naming the account; logged %v", logs.all())
			}
			if n := len(e.eng.ins.All()); n != 0 {
				t.Errorf("%d messages ingested", n)
			}
		})
	}
}
