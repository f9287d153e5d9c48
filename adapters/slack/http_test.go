package slack

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignatureVectors(t *testing.T) {
	var v struct {
		Secret  string `json:"signing_secret"`
		Vectors []struct {
			Name      string `json:"name"`
			TS        string `json:"X-Slack-Request-Timestamp"`
			RawBody   string `json:"raw_body"`
			Signature string `json:"expected_X-Slack-Signature"`
			VerifyAt  int64  `json:"verify_at_unix"`
			Expect    string `json:"expect"`
		} `json:"vectors"`
	}
	unmarshal(t, fixture(t, "request_signing_vectors.json"), &v)
	if len(v.Vectors) != 4 {
		t.Fatalf("got %d vectors, want 4", len(v.Vectors))
	}
	for _, c := range v.Vectors {
		t.Run(c.Name, func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Slack-Request-Timestamp", c.TS)
			h.Set("X-Slack-Signature", c.Signature)
			err := VerifySignature(h, []byte(c.RawBody), v.Secret, time.Unix(c.VerifyAt, 0))
			switch {
			case c.Expect == "valid" && err != nil:
				t.Errorf("valid vector refused: %v", err)
			case strings.Contains(c.Expect, "older than 5 minutes") && !errors.Is(err, ErrExpiredTimestamp):
				t.Errorf("replay: err = %v, want ErrExpiredTimestamp", err)
			case strings.Contains(c.Expect, "mismatch") && !errors.Is(err, ErrBadSignature):
				t.Errorf("tampered: err = %v, want ErrBadSignature", err)
			}
		})
	}
}

// TestHTTPRefusesBeforeParsing: a bad signature, a 6-minute-old timestamp or no
// signature at all get 401 and the engine never sees the event.
func TestHTTPRefusesBeforeParsing(t *testing.T) {
	e := newEnv(t, nil)
	body := fixture(t, "events_api_app_mention_channel.json")
	now := testNow.Unix()
	cases := []struct {
		name string
		ts   int64
		sig  string
	}{
		{"bad signature", now, sign("wrong-secret", now, body)},
		{"six minutes old", now - 360, sign(testSecret, now-360, body)},
		{"six minutes ahead", now + 360, sign(testSecret, now+360, body)},
		{"missing", now, ""},
		{"not v0", now, strings.Replace(sign(testSecret, now, body), "v0=", "v1=", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/slack/acme/events", strings.NewReader(string(body)))
			req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(c.ts, 10))
			if c.sig != "" {
				req.Header.Set("X-Slack-Signature", c.sig)
			}
			rec := httptest.NewRecorder()
			e.mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", rec.Code)
			}
		})
	}
	if got := e.engine.ins.All(); len(got) != 0 {
		t.Errorf("engine got %d inbounds, want none", len(got))
	}
	if calls := e.slack.Calls(); len(calls) != 0 {
		t.Errorf("refused requests reached Slack: %+v", calls)
	}
}

func TestURLVerification(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.postEvent(t, "url_verification.json")
	if got := rec.Body.String(); got != "TESTchallenge3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALW" {
		t.Errorf("challenge answer %q", got)
	}
}

func TestHTTPIngestFailureAsksForRetry(t *testing.T) {
	e := newEnv(t, nil)
	e.engine.err = errors.New("disk full")
	rec := e.post(t, "/slack/acme/events", fixture(t, "events_api_app_mention_channel.json"), nil)
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500 so Slack retries", rec.Code)
	}
}

func TestInteractiveEndpoint(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Clock = fixedClock{time.Unix(1767225702, 0)} })
	body := []byte(strings.TrimSpace(string(fixture(t, "interactive_block_actions.http_body.txt"))))
	rec := e.post(t, "/slack/acme/interactive", body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if rec.Code != http.StatusOK {
		t.Errorf("interactive status %d %s", rec.Code, rec.Body)
	}
	req := httptest.NewRequest(http.MethodPost, "/slack/acme/interactive", strings.NewReader(string(body)))
	rec = httptest.NewRecorder()
	e.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("unsigned interactive status %d, want 401", rec.Code)
	}
}

func TestNewValidates(t *testing.T) {
	eng := newFakeEngine()
	base := Options{Name: "a", BotToken: "xoxb", AppToken: "xapp", Engine: eng}
	cases := []struct {
		mut  func(*Options)
		want error
	}{
		{func(o *Options) { o.Name = "" }, ErrNoName},
		{func(o *Options) { o.BotToken = "" }, ErrNoToken},
		{func(o *Options) { o.Engine = nil }, ErrNoEngine},
		{func(o *Options) { o.AppToken = "" }, ErrNoAppToken},
		{func(o *Options) { o.Mode = ModeHTTP }, ErrNoSigningSecret},
		{func(o *Options) { o.Mode = "rtm" }, ErrBadMode},
	}
	for _, c := range cases {
		o := base
		c.mut(&o)
		if _, err := New(o); !errors.Is(err, c.want) {
			t.Errorf("New: err = %v, want %v", err, c.want)
		}
	}
	a, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if a.Account() != "slack/a" || a.Bot() != "*" {
		t.Errorf("Account %q Bot %q", a.Account(), a.Bot())
	}
}
