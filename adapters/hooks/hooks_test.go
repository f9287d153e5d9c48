package hooks

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// fakeEngine records what is ingested; a dedup key seen before is a duplicate.
type fakeEngine struct {
	mu   sync.Mutex
	got  []core.Inbound
	seen map[string]bool
}

func (f *fakeEngine) Ingest(_ context.Context, in core.Inbound) (core.IngestResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if f.seen[in.DedupKey] {
		return core.IngestResult{Duplicate: true}, nil
	}
	f.seen[in.DedupKey] = true
	f.got = append(f.got, in)
	return core.IngestResult{Thread: 1, Woken: in.Mentions}, nil
}

func (f *fakeEngine) inbounds() []core.Inbound {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.Inbound(nil), f.got...)
}

// lockedBuf is a log sink safe for the handler's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) warns() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			out = append(out, line)
		}
	}
	return out
}

const (
	ghSecret     = "gh-webhook-secret"
	sentrySecret = "sentry-client-secret"
	hmacSecret   = "generic-hmac-secret"
	bearerToken  = "generic-bearer-token"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func testTriggers() []Trigger {
	target := func(t Trigger) Trigger {
		t.Bot, t.Account, t.Platform, t.Conversation = "engineer", "slack/acme", "slack", "T1:C1"
		return t
	}
	return []Trigger{
		target(Trigger{Name: "github", Kind: KindGitHub, Secret: ghSecret,
			Thread: "github:{repository.full_name}#{pull_request.number}", Events: []string{"pull_request.opened", "pull_request.synchronize"},
			Message: "PR {pull_request.number} {action}: {pull_request.title} by {pull_request.user.login}"}),
		target(Trigger{Name: "sentry", Kind: KindSentry, Secret: sentrySecret, Thread: "sentry:{data.issue.id}",
			Events: []string{"issue"}, When: map[string]string{"data.issue.level": "error"},
			Message: "Sentry {data.issue.shortId}: {data.issue.title}"}),
		target(Trigger{Name: "deploys", Kind: KindHMAC, Secret: hmacSecret, MaxBody: 4096}),
		target(Trigger{Name: "alerts", Kind: KindBearer, Secret: bearerToken, RunsPer: 2, Per: time.Minute}),
	}
}

func newTestServer(t *testing.T, tr []Trigger) (*Server, *fakeEngine, *lockedBuf) {
	t.Helper()
	eng := &fakeEngine{}
	var logs lockedBuf
	s, err := New(Options{Engine: eng, Triggers: tr, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return s, eng, &logs
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// githubRequest is a delivery as GitHub sends it.
func githubRequest(body []byte, event, delivery, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", delivery)
	r.Header.Set("X-Hub-Signature-256", "sha256="+Sign(secret, body))
	return r
}

func sentryRequest(body []byte, resource, requestID, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/sentry", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Request-ID", requestID)
	r.Header.Set("Sentry-Hook-Resource", resource)
	r.Header.Set("Sentry-Hook-Timestamp", strconv.FormatInt(now.Unix(), 10))
	r.Header.Set("Sentry-Hook-Signature", Sign(secret, body))
	return r
}

func hmacRequest(body []byte, at time.Time, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/deploys", bytes.NewReader(body))
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set("X-Signature-Timestamp", ts)
	r.Header.Set("X-Signature", "sha256="+Sign(secret, append([]byte(ts+"."), body...)))
	return r
}

func serve(s *Server, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestGitHubDocumentedVector checks the signature against GitHub's own
// documented example (secret, payload and signature from its docs).
func TestGitHubDocumentedVector(t *testing.T) {
	tr := &Trigger{Kind: KindGitHub, Secret: "It's a Secret to Everybody"}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	if err := verify(tr, h, []byte("Hello, World!"), now); err != nil {
		t.Errorf("documented vector refused: %v", err)
	}
	if err := verify(tr, h, []byte("Hello, World?"), now); err == nil {
		t.Error("a changed body passed")
	}
}

// TestGitHubPullRequestBecomesAMessage: the documented PR-opened payload is
// stored as a message from trigger:github addressed to the bot, keyed by the
// delivery id, in the PR's thread, with the payload attached; a redelivery is
// a duplicate.
func TestGitHubPullRequestBecomesAMessage(t *testing.T) {
	s, eng, _ := newTestServer(t, testTriggers())
	body := readTestdata(t, "github_pull_request_opened.json")
	w := serve(s, githubRequest(body, "pull_request", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ghSecret))
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d %q, want 202", w.Code, w.Body)
	}
	got := eng.inbounds()
	if len(got) != 1 {
		t.Fatalf("%d ingested, want 1", len(got))
	}
	in := got[0]
	want := core.Inbound{Account: "slack/acme", Platform: "slack", Conversation: "T1:C1",
		DedupKey: "hook:github:72d3162e-cc78-11e3-81ab-4c9367dc0958", ThreadKey: "hook:github:Codertocat/Hello-World#2",
		SenderID: "trigger:github", SenderName: "github"}
	if in.Account != want.Account || in.Platform != want.Platform || in.Conversation != want.Conversation ||
		in.DedupKey != want.DedupKey || in.ThreadKey != want.ThreadKey || in.SenderID != want.SenderID {
		t.Errorf("inbound %+v\nwant %+v", in, want)
	}
	if !in.Announce || !in.StartThread || in.WakeNobody || len(in.Mentions) != 1 || in.Mentions[0] != "engineer" {
		t.Errorf("inbound flags: announce %v start %v quiet %v mentions %v", in.Announce, in.StartThread, in.WakeNobody, in.Mentions)
	}
	if !strings.HasPrefix(in.Text, "PR 2 opened: Update the README with new information. by Codertocat") || !strings.Contains(in.Text, "untrusted") {
		t.Errorf("text %q", in.Text)
	}
	if len(in.Attachments) != 1 || !bytes.Equal(in.Attachments[0].Data, body) || in.Attachments[0].Name != "payload.json" {
		t.Errorf("attachments %+v, want the raw payload", in.Attachments)
	}
	serve(s, githubRequest(body, "pull_request", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ghSecret))
	if n := len(eng.inbounds()); n != 1 {
		t.Errorf("a redelivery ingested again: %d", n)
	}
}

// TestSentryIssue: the documented Sentry issue payload, its real signature
// scheme, Request-ID as the dedup key, the field condition.
func TestSentryIssue(t *testing.T) {
	s, eng, _ := newTestServer(t, testTriggers())
	body := readTestdata(t, "sentry_issue_created.json")
	if w := serve(s, sentryRequest(body, "issue", "a1b2c3", sentrySecret)); w.Code != http.StatusAccepted {
		t.Fatalf("status %d %q", w.Code, w.Body)
	}
	got := eng.inbounds()
	if len(got) != 1 || got[0].ThreadKey != "hook:sentry:1170820242" || got[0].DedupKey != "hook:sentry:a1b2c3" ||
		!strings.HasPrefix(got[0].Text, "Sentry FRONT-END-9: ReferenceError: blooopy is not defined") {
		t.Fatalf("ingested %+v", got)
	}
	warning := bytes.Replace(body, []byte(`"level": "error"`), []byte(`"level": "warning"`), 1)
	w := serve(s, sentryRequest(warning, "issue", "d4e5f6", sentrySecret))
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), "ignored") || len(eng.inbounds()) != 1 {
		t.Errorf("a warning-level issue: status %d %q, %d ingested; want ignored", w.Code, w.Body, len(eng.inbounds()))
	}
}

// TestEventsFilter: an event not in the list is acknowledged and not stored.
func TestEventsFilter(t *testing.T) {
	s, eng, _ := newTestServer(t, testTriggers())
	body := bytes.Replace(readTestdata(t, "github_pull_request_opened.json"), []byte(`"action": "opened"`), []byte(`"action": "closed"`), 1)
	w := serve(s, githubRequest(body, "pull_request", "d1", ghSecret))
	if w.Code != http.StatusAccepted || len(eng.inbounds()) != 0 {
		t.Errorf("pull_request.closed: status %d, %d ingested; want 202 and none", w.Code, len(eng.inbounds()))
	}
}

// TestRefusalsLookAlike: every way a request is refused gets the same answer,
// one WARN line naming the reason, and nothing stored.
func TestRefusalsLookAlike(t *testing.T) {
	s, eng, logs := newTestServer(t, testTriggers())
	pr := readTestdata(t, "github_pull_request_opened.json")
	small := []byte(`{"event":"deploy","status":"failed"}`)
	cases := []struct {
		name, reason string
		req          func() *http.Request
	}{
		{"unknown trigger", "unknown trigger", func() *http.Request {
			r := githubRequest(pr, "pull_request", "x1", ghSecret)
			r.URL.Path = "/hooks/nope"
			return r
		}},
		{"bad signature", "signature does not match", func() *http.Request { return githubRequest(pr, "pull_request", "x2", "wrong") }},
		{"unsigned", "no X-Hub-Signature-256", func() *http.Request {
			r := githubRequest(pr, "pull_request", "x3", ghSecret)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}},
		{"sentry bad signature", "signature does not match", func() *http.Request { return sentryRequest(pr, "issue", "x4", "wrong") }},
		{"expired timestamp", "timestamp outside the window", func() *http.Request { return hmacRequest(small, now.Add(-10*time.Minute), hmacSecret) }},
		{"future timestamp", "timestamp outside the window", func() *http.Request { return hmacRequest(small, now.Add(10*time.Minute), hmacSecret) }},
		{"body over the cap", "over the cap", func() *http.Request {
			return hmacRequest([]byte(`{"pad":"`+strings.Repeat("x", 5000)+`"}`), now, hmacSecret)
		}},
		{"wrong bearer", "wrong or missing bearer", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/hooks/alerts", bytes.NewReader(small))
			r.Header.Set("Authorization", "Bearer "+bearerToken+"x")
			return r
		}},
		{"wrong method", "no such hook route", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/hooks/github", nil) }},
	}
	var first *httptest.ResponseRecorder
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(logs.warns())
			w := serve(s, tc.req())
			if first == nil {
				first = w
			}
			if w.Code != first.Code || w.Body.String() != first.Body.String() || w.Code != http.StatusForbidden {
				t.Errorf("answer %d %q, want the same as every refusal (403 %q)", w.Code, w.Body, first.Body)
			}
			warns := logs.warns()[before:]
			if len(warns) != 1 || !strings.Contains(warns[0], tc.reason) {
				t.Errorf("WARN lines %q, want one naming %q", warns, tc.reason)
			}
		})
	}
	if n := len(eng.inbounds()); n != 0 {
		t.Errorf("%d refused requests ingested", n)
	}
	if strings.Contains(strings.Join(logs.warns(), "\n"), ghSecret) {
		t.Error("a secret is in the log")
	}
	// The same requests, signed right, are taken.
	if w := serve(s, hmacRequest(small, now.Add(-time.Minute), hmacSecret)); w.Code != http.StatusAccepted {
		t.Errorf("a fresh hmac request: %d %q", w.Code, w.Body)
	}
	r := httptest.NewRequest(http.MethodPost, "/hooks/alerts", bytes.NewReader(small))
	r.Header.Set("Authorization", "Bearer "+bearerToken)
	if w := serve(s, r); w.Code != http.StatusAccepted {
		t.Errorf("the right bearer token: %d %q", w.Code, w.Body)
	}
}

// TestRateLimit: a burst over the limit is stored in full, but only the
// allowed number of events wake the bot; the bucket refills with time.
func TestRateLimit(t *testing.T) {
	tr := testTriggers()
	s, eng, logs := newTestServer(t, tr)
	send := func(i int) {
		r := httptest.NewRequest(http.MethodPost, "/hooks/alerts", strings.NewReader(`{"event":"alert","n":`+strconv.Itoa(i)+`}`))
		r.Header.Set("Authorization", "Bearer "+bearerToken)
		if w := serve(s, r); w.Code != http.StatusAccepted {
			t.Fatalf("event %d: %d", i, w.Code)
		}
	}
	for i := range 6 {
		send(i)
	}
	got := eng.inbounds()
	waking := 0
	for _, in := range got {
		if !in.WakeNobody {
			waking++
		}
	}
	if len(got) != 6 || waking != 2 {
		t.Errorf("%d stored, %d waking; want 6 stored, 2 waking", len(got), waking)
	}
	if n := len(logs.warns()); n != 4 {
		t.Errorf("%d WARN lines, want one per event over the limit (4)", n)
	}
	now = now.Add(30 * time.Second) // half the period: one more run
	defer func() { now = now.Add(-30 * time.Second) }()
	send(7)
	send(8)
	got = eng.inbounds()
	if got[6].WakeNobody || !got[7].WakeNobody {
		t.Errorf("after refill: wake %v %v, want the first only", !got[6].WakeNobody, !got[7].WakeNobody)
	}
}

// TestDailyBudget: past max_runs_per_day, events start no run until the next UTC day.
func TestDailyBudget(t *testing.T) {
	l := newLimiter(0, 0, 2)
	day := time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)
	if !l.take(day) || !l.take(day) || l.take(day) {
		t.Error("budget of 2 did not allow exactly 2")
	}
	if !l.take(day.Add(2 * time.Hour)) {
		t.Error("the next day's budget was not fresh")
	}
}

// TestPayloadMentionsNoBot: an @handle in a payload value does not address a bot.
func TestPayloadMentionsNoBot(t *testing.T) {
	out, _ := render("{title}", map[string]any{"title": "ping @reviewer"}, nil)
	if strings.Contains(out, "@reviewer") || len(core.ParseMentions(out, func(string) bool { return true })) != 0 {
		t.Errorf("rendered %q still mentions", out)
	}
}

// TestConfigErrors: New names what is wrong.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Trigger)
		want string
	}{
		{func(t *Trigger) { t.Kind = "gitlab" }, "kind"},
		{func(t *Trigger) { t.Secret = "" }, "secret"},
		{func(t *Trigger) { t.Thread = "x{a" }, "brace"},
		{func(t *Trigger) { t.Conversation = "" }, "target"},
	} {
		tr := testTriggers()[:1]
		tc.mod(&tr[0])
		if _, err := New(Options{Engine: &fakeEngine{}, Triggers: tr}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one about %s", err, tc.want)
		}
	}
}

// TestHMACReplayWithAnotherID: a signed hmac request replayed within its
// window with a different (unsigned) Idempotency-Key is still a duplicate.
func TestHMACReplayWithAnotherID(t *testing.T) {
	s, eng, _ := newTestServer(t, testTriggers())
	body := []byte(`{"event":"deploy","service":"api"}`)
	for _, id := range []string{"a", "b"} {
		r := hmacRequest(body, now, hmacSecret)
		r.Header.Set("Idempotency-Key", id)
		if w := serve(s, r); w.Code != http.StatusAccepted {
			t.Fatalf("status %d", w.Code)
		}
	}
	if n := len(eng.inbounds()); n != 1 {
		t.Errorf("%d stored, want the replay recognised", n)
	}
}

// TestLongRenderings: a thread key over its limit is hashed, a long message cut.
func TestLongRenderings(t *testing.T) {
	tr := testTriggers()[3:] // alerts: bearer
	tr[0].Thread, tr[0].Message, tr[0].RunsPer = "k:{long}", "{long}", 0
	s, eng, _ := newTestServer(t, tr)
	long := strings.Repeat("x", 20000)
	r := httptest.NewRequest(http.MethodPost, "/hooks/alerts", strings.NewReader(`{"event":"e","long":"`+long+`"}`))
	r.Header.Set("Authorization", "Bearer "+bearerToken)
	if w := serve(s, r); w.Code != http.StatusAccepted {
		t.Fatalf("status %d", w.Code)
	}
	for _, in := range eng.inbounds() {
		if len(in.ThreadKey) > maxThreadKey+20 || !strings.HasPrefix(in.ThreadKey, "hook:sha256:") || len([]rune(in.Text)) > maxMessage+len([]rune(untrustedNote)) {
			t.Errorf("thread key %d bytes, text %d runes", len(in.ThreadKey), len([]rune(in.Text)))
		}
	}
	if len(eng.inbounds()) != 1 {
		t.Errorf("%d stored, want 1", len(eng.inbounds()))
	}
}
