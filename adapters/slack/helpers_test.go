package slack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"openbot/adapters/internal/adaptertest"
	"openbot/adapters/slack/slacktest"
	"openbot/core"
	"openbot/internal/runtest"
)

const testSecret = "0TESTsigningSecret0b1c2d3e4f5a6b7"

// fakeEngine records every Inbound and answers with result (or err).
type fakeEngine struct {
	mu      sync.Mutex
	ins     adaptertest.Log[core.Inbound]
	seen    map[string]bool
	err     error
	errFn   func(core.Inbound) error // when set and non-nil for an Inbound, Ingest fails with it
	gate    chan struct{}            // when set, Ingest waits for it (or ctx) first
	woken   []string                 // IngestResult.Woken for new messages
	answers adaptertest.Log[core.Answer]
	// answerFn decides Answer's result; nil accepts every answer.
	answerFn func(core.Answer) (core.AnswerResult, error)
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{seen: map[string]bool{}}
}

func (f *fakeEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return core.IngestResult{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return core.IngestResult{}, f.err
	}
	if f.errFn != nil {
		if err := f.errFn(in); err != nil {
			return core.IngestResult{}, err
		}
	}
	n := f.ins.Add(in)
	if f.seen[in.DedupKey] {
		return core.IngestResult{Duplicate: true}, nil
	}
	f.seen[in.DedupKey] = true
	return core.IngestResult{Thread: 1, Message: core.MessageID(n), Woken: f.woken}, nil
}

// Answer records ans and returns what answerFn says (default: accepted).
func (f *fakeEngine) Answer(ctx context.Context, ans core.Answer) (core.AnswerResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers.Add(ans)
	if f.answerFn != nil {
		return f.answerFn(ans)
	}
	return core.AnswerResult{Outcome: core.AnswerAccepted}, nil
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// testNow is the fixtures' verify time (request_signing_vectors.json).
var testNow = time.Unix(1767225610, 0)

type env struct {
	slack  *slacktest.Server
	engine *fakeEngine
	a      *Adapter
	mux    *http.ServeMux
}

func newEnv(t *testing.T, mut func(*Options)) *env {
	t.Helper()
	srv := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test", PingInterval: 200 * time.Millisecond})
	t.Cleanup(srv.Close)
	srv.AddUser(slacktest.User{ID: "U0TEST001", Name: "alice", RealName: "Alice Example", DisplayName: "Alice"})
	srv.AddUser(slacktest.User{ID: "U0TEST002", Name: "bob", RealName: "Bob Example"})
	eng := newFakeEngine()
	opts := Options{
		Name: "acme", Bot: "engineer", Mode: ModeHTTP,
		AppToken: "xapp-test", BotToken: "xoxb-test", SigningSecret: testSecret,
		APIURL: srv.APIURL(),
		Bots: []core.BotProfile{
			{Handle: "engineer", Name: "Engineer"},
			{Handle: "chief_of_staff", Name: "Chief of Staff"},
		},
		Engine:   eng,
		DMPolicy: core.DMOpen, // the fake engine pairs nobody; core's tests and e2e cover pairing
		Clock:    fixedClock{testNow},
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mut != nil {
		mut(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.bg.wait(10 * time.Second) }) // notices log through t
	mux := http.NewServeMux()
	a.MountHTTP(mux)
	return &env{slack: srv, engine: eng, a: a, mux: mux}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + strconv.FormatInt(ts, 10) + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// post sends a signed request (signed now, per the env's clock) to the adapter.
func (e *env) post(t *testing.T, path string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	ts := e.a.clock.Now().Unix()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.mux.ServeHTTP(rec, req)
	return rec
}

func (e *env) postEvent(t *testing.T, fixtureName string) *httptest.ResponseRecorder {
	t.Helper()
	rec := e.post(t, "/slack/acme/events", fixture(t, fixtureName), nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: status %d %s", fixtureName, rec.Code, rec.Body)
	}
	return rec
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func slacktestBot(id, name string) slacktest.User {
	return slacktest.User{ID: id, Name: name, RealName: name, IsBot: true}
}

// syncBuffer is a buffer safe for a logger writing from several goroutines.
type syncBuffer = runtest.Buffer
