package slack

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// secrets that must never reach a log line.
var logSecrets = []string{testSecret, "xoxb-test", "xapp-test", "TESTverificationTOKEN000"}

// badRequest is one malformed or refused platform request.
type badRequest struct {
	name   string
	reason string // expected in the WARN line
	opts   func(*Options)
	engine func(*fakeEngine)
	req    func(t *testing.T, e *env) *http.Request
}

// signed builds a request signed with the test secret at the env's clock.
func signed(e *env, method, path, contentType string, body []byte) *http.Request {
	ts := e.a.clock.Now().Unix()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	return req
}

func eventBody(event string) []byte {
	return []byte(`{"token":"TESTverificationTOKEN000","team_id":"T0TEST","api_app_id":"A0TESTAPP","type":"event_callback","event_id":"Ev1","event_time":1767225600,"event":` + event + `}`)
}

func postEvents(body []byte) func(*testing.T, *env) *http.Request {
	return func(_ *testing.T, e *env) *http.Request {
		return signed(e, http.MethodPost, "/slack/acme/events", "application/json", body)
	}
}

func postInteractive(payload string) func(*testing.T, *env) *http.Request {
	return func(_ *testing.T, e *env) *http.Request {
		body := []byte(url.Values{"payload": {payload}}.Encode())
		return signed(e, http.MethodPost, "/slack/acme/interactive", "application/x-www-form-urlencoded", body)
	}
}

func questionClick(user string) string {
	return string(slacktest.Click{User: user, UserName: "alice", Channel: "C0TEST001", MessageTS: "1767225601.000100",
		ActionID: "openbot_q_0", Value: "tok123:0"}.Payload())
}

// badRequests are the kinds of bad request the HTTP endpoints refuse.
func badRequests() []badRequest {
	body := []byte(`{"token":"TESTverificationTOKEN000","type":"event_callback"}`)
	withHeaders := func(ts int64, sig string) func(*testing.T, *env) *http.Request {
		return func(_ *testing.T, e *env) *http.Request {
			req := httptest.NewRequest(http.MethodPost, "/slack/acme/events", bytes.NewReader(body))
			if ts != 0 {
				req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
			}
			if sig != "" {
				req.Header.Set("X-Slack-Signature", sig)
			}
			return req
		}
	}
	now := testNow.Unix()
	return []badRequest{
		{name: "no signature", reason: "missing signature headers", req: withHeaders(now, "")},
		{name: "no timestamp", reason: "missing signature headers", req: withHeaders(0, sign(testSecret, now, body))},
		{name: "stale timestamp", reason: "stale or future request timestamp", req: withHeaders(now-360, sign(testSecret, now-360, body))},
		{name: "future timestamp", reason: "stale or future request timestamp", req: withHeaders(now+360, sign(testSecret, now+360, body))},
		{name: "wrong secret", reason: "bad signature", req: withHeaders(now, sign("wrong", now, body))},
		{name: "not v0", reason: "bad signature", req: withHeaders(now, strings.Replace(sign(testSecret, now, body), "v0=", "v1=", 1))},
		{name: "timestamp not a number", reason: "bad signature", req: func(t *testing.T, e *env) *http.Request {
			r := withHeaders(now, sign(testSecret, now, body))(t, e)
			r.Header.Set("X-Slack-Request-Timestamp", "yesterday")
			return r
		}},
		{name: "body too large", reason: "body unreadable or too large", req: postEvents(bytes.Repeat([]byte("x"), maxBody+1))},
		{name: "events bad json", reason: "event body is not JSON", req: postEvents([]byte(`{"token":"TESTverificationTOKEN000",`))},
		{name: "url_verification without challenge", reason: "url_verification without a challenge", req: postEvents([]byte(`{"token":"TESTverificationTOKEN000","type":"url_verification"}`))},
		{name: "unknown envelope type", reason: "unknown event envelope type", req: postEvents([]byte(`{"token":"TESTverificationTOKEN000","type":"something_new"}`))},
		{name: "event missing", reason: "event payload does not decode", req: postEvents(body)},
		{name: "unknown inner event type", reason: "event payload does not decode", req: postEvents(eventBody(`{"type":"weird_thing"}`))},
		{name: "inner event of the wrong shape", reason: "event payload does not decode", req: postEvents(eventBody(`{"type":"message","ts":42}`))},
		{name: "event type not subscribed", reason: "event type openbot does not subscribe to", req: postEvents(eventBody(`{"type":"reaction_added","user":"U0TEST001","reaction":"eyes","item":{"type":"message","channel":"C0TEST001","ts":"1.2"},"event_ts":"1.3"}`))},
		{name: "message without ts", reason: "message event without ts", req: postEvents(eventBody(`{"type":"message","channel":"D0TEST001","channel_type":"im","user":"U0TEST001","text":"hi"}`))},
		{name: "message without channel", reason: "message event without channel", req: postEvents(eventBody(`{"type":"message","user":"U0TEST001","text":"hi","ts":"1767225600.000100"}`))},
		{name: "message without user", reason: "message event without user", req: postEvents(eventBody(`{"type":"message","channel":"D0TEST001","channel_type":"im","text":"hi","ts":"1767225600.000100"}`))},
		{name: "DM from a user not allowed", reason: "channel or user not on the allow list",
			opts: func(o *Options) { o.AllowUsers = []string{"U0TEST002"} },
			req:  postEvents(eventBody(`{"type":"message","channel":"D0TEST001","channel_type":"im","user":"U0TEST001","text":"hi","ts":"1767225600.000100"}`))},
		{name: "interactive without payload", reason: "interactive request without a payload field", req: func(_ *testing.T, e *env) *http.Request {
			return signed(e, http.MethodPost, "/slack/acme/interactive", "application/x-www-form-urlencoded", []byte("token=TESTverificationTOKEN000"))
		}},
		{name: "interactive payload not JSON", reason: "interactive payload is not JSON", req: postInteractive(`{"type":`)},
		{name: "interaction not for openbot", reason: "interaction is not a click on an openbot question button", req: postInteractive(`{"type":"view_submission","token":"TESTverificationTOKEN000","user":{"id":"U0TEST001"}}`)},
		{name: "button with a malformed value", reason: "interaction is not a click on an openbot question button", req: postInteractive(strings.Replace(questionClick("U0TEST001"), "tok123:0", "garbage", 1))},
		{name: "click without a user", reason: "click without an identifiable user", req: postInteractive(questionClick(""))},
		{name: "click by someone who may not answer", reason: "clicker may not answer this question",
			engine: func(f *fakeEngine) {
				f.answerFn = func(core.Answer) (core.AnswerResult, error) {
					return core.AnswerResult{Outcome: core.AnswerForbidden, Question: core.Question{ID: 7, Bot: "bot:engineer"}}, nil
				}
			},
			req: postInteractive(questionClick("U0TEST002"))},
		{name: "click for an unknown question", reason: "click for an unknown question or choice",
			engine: func(f *fakeEngine) {
				f.answerFn = func(core.Answer) (core.AnswerResult, error) {
					return core.AnswerResult{Outcome: core.AnswerUnknown}, nil
				}
			},
			req: postInteractive(questionClick("U0TEST001"))},
		{name: "slash command without a user", reason: "slash command without command, channel or user", req: postCommand(slacktest.Command{Channel: "D0TEST001", Command: "/new"})},
		{name: "unknown slash command", reason: "unknown slash command", req: postCommand(slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/deploy"})},
		{name: "slash command from a user not allowed", reason: "channel or user not on the allow list",
			opts: func(o *Options) { o.AllowUsers = []string{"U0TEST002"} },
			req:  postCommand(slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/new"})},
		{name: "unsigned slash command", reason: "missing signature headers", req: func(_ *testing.T, e *env) *http.Request {
			return httptest.NewRequest(http.MethodPost, "/slack/acme/commands", strings.NewReader(slacktest.Command{Channel: "D0TEST001", User: "U0TEST001", Command: "/new"}.Form().Encode()))
		}},
		{name: "GET on the events endpoint", reason: "no such endpoint", req: func(_ *testing.T, e *env) *http.Request {
			return httptest.NewRequest(http.MethodGet, "/slack/acme/events", nil)
		}},
		{name: "unknown endpoint", reason: "no such endpoint", req: postEventsTo("/slack/acme/nope")},
	}
}

func postCommand(c slacktest.Command) func(*testing.T, *env) *http.Request {
	return func(_ *testing.T, e *env) *http.Request {
		return signed(e, http.MethodPost, "/slack/acme/commands", "application/x-www-form-urlencoded", []byte(c.Form().Encode()))
	}
}

func postEventsTo(path string) func(*testing.T, *env) *http.Request {
	return func(_ *testing.T, e *env) *http.Request {
		return signed(e, http.MethodPost, path, "application/json", []byte(`{"token":"TESTverificationTOKEN000"}`))
	}
}

// TestBadRequestsLogWarn: every malformed or refused request leaves one WARN line
// naming the account and the reason, with no secret in it, and nothing is stored.
func TestBadRequestsLogWarn(t *testing.T) {
	for _, c := range badRequests() {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			e := newEnv(t, func(o *Options) {
				o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				if c.opts != nil {
					c.opts(o)
				}
			})
			if c.engine != nil {
				c.engine(e.engine)
			}
			rec := httptest.NewRecorder()
			e.mux.ServeHTTP(rec, c.req(t, e))
			e.a.bg.wait(5e9)
			checkWarn(t, logs.String(), c.reason)
			if got := e.engine.ins.All(); len(got) != 0 {
				t.Errorf("a bad request was ingested: %+v", got)
			}
		})
	}
}

// checkWarn finds a WARN line with account slack/acme and reason, and no secret in
// any line.
func checkWarn(t *testing.T, logs, reason string) {
	t.Helper()
	found := false
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["level"] == "WARN" && rec["account"] == "slack/acme" && rec["reason"] == reason {
			found = true
		}
	}
	if !found {
		t.Errorf("no WARN line with account=slack/acme reason=%q in:\n%s", reason, logs)
	}
	for _, s := range logSecrets {
		if strings.Contains(logs, s) {
			t.Errorf("log contains the secret %q:\n%s", s, logs)
		}
	}
}
