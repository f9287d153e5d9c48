package agents

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/internal/runtest"
	"openbot/store/bolt"
)

// syncBuffer is a buffer for a logger shared by goroutines.
type syncBuffer = runtest.Buffer

// noWait skips retry waits.
func noWait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// noticeRecorder is a whole-team console account that records delivered texts
// and says so on delivered (capacity 1: one pending wake-up is enough).
type noticeRecorder struct {
	mu        sync.Mutex
	got       []string
	delivered chan struct{}
}

func (r *noticeRecorder) Account() core.AccountID { return "console/local" }
func (r *noticeRecorder) Bot() string             { return "*" }
func (r *noticeRecorder) Deliver(_ context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d.Text)
	select {
	case r.delivered <- struct{}{}:
	default:
	}
	return "p", nil
}

func (r *noticeRecorder) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// failedRun is what a failed run left behind.
type failedRun struct {
	notice string // the thread's notice
	log    string // every log line of engine and agent
	stored string // the stored run error and run events
}

// runToFailure sends one message to a one-bot team on the given provider and
// waits until the run has failed and its notice is delivered.
func runToFailure(t *testing.T, prov Provider) failedRun {
	t.Helper()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	agent, err := New(Options{Providers: map[string]Provider{"default": prov}, Logger: log, sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: agent, Bots: []core.BotProfile{{Handle: "chief_of_staff"}},
		Logger: log, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ad := &noticeRecorder{delivered: make(chan struct{}, 1)}
	if err := eng.AddAdapter(ad); err != nil {
		t.Fatal(err)
	}
	ctx, stop := runtest.Start(t, eng.Run)
	defer stop()
	if _, err := eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:1",
		ThreadKey: "console:main", Conversation: "main", PlatformID: "in1",
		SenderID: "console:you", SenderName: "you", Text: "hello", StartThread: true}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := eng.WaitIdle(wctx); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	select { // the notice's lane delivers after the run settled
	case <-ad.delivered:
	case <-time.After(10 * time.Second):
	}
	texts := ad.texts()
	if len(texts) != 1 {
		t.Fatalf("deliveries = %q, want one notice", texts)
	}
	var out failedRun
	out.notice = texts[0]
	err = st.View(ctx, func(tx core.ReadTx) error {
		r, err := tx.Run(1)
		if err != nil {
			return err
		}
		if r.Status != core.RunFailed || r.Error == "" {
			t.Errorf("run = %+v, want failed with an error", r)
		}
		out.stored = r.Error
		evs, err := tx.RunEvents(1)
		for _, e := range evs {
			out.stored += "\n" + string(e.Payload)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out.log = logs.String()
	return out
}

// TestModelFailureKeepsCredentialsOut: a base_url with user:password and an
// api-key query, pointing at an address where nothing listens. The secret is in
// no log line, no stored error and no notice; the notice names the cause in words
// and shows no internal address, while the log keeps the address.
func TestModelFailureKeepsCredentialsOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	prov := Provider{BaseURL: "http://alice:hunter2pass@" + addr + "/v1?api-key=SECRETKEY123", APIKey: "sk-APIKEY-456", Model: "m"}
	got := runToFailure(t, prov)
	for where, text := range map[string]string{"log": got.log, "stored error": got.stored, "notice": got.notice} {
		for _, secret := range []string{"SECRETKEY123", "hunter2pass", "sk-APIKEY-456"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains %q:\n%s", where, secret, text)
			}
		}
	}
	if strings.Contains(got.notice, "127.0.0.1") || !strings.Contains(got.notice, "could not be reached") {
		t.Errorf("notice = %q, want the cause in words without the address", got.notice)
	}
	if !strings.Contains(got.log, "127.0.0.1") {
		t.Errorf("the log lost the address it needs for diagnosis:\n%s", got.log)
	}
}

// TestModelHTTPErrorNotice: a model server answering 5xx with an address in its
// message: the retry log lines carry the status and the message once, the notice
// has the status and no address, and nothing carries the api-key query.
func TestModelHTTPErrorNotice(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Error(502, "upstream 10.1.2.3:8000 is overloaded")
	})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = "api-key=SECRETKEY123"
	got := runToFailure(t, Provider{BaseURL: u.String(), Model: "m"})
	if strings.Contains(got.log+got.stored+got.notice, "SECRETKEY123") {
		t.Errorf("the api-key leaked:\nlog %s\nstored %s\nnotice %s", got.log, got.stored, got.notice)
	}
	if !strings.Contains(got.notice, "HTTP 502") || strings.Contains(got.notice, "10.1.2.3") || strings.Contains(got.notice, "127.0.0.1") {
		t.Errorf("notice = %q", got.notice)
	}
	for _, l := range strings.Split(got.log, "\n") {
		if !strings.Contains(l, "retrying") {
			continue
		}
		if !strings.Contains(l, "status=502") || strings.Count(l, "is overloaded") != 1 {
			t.Errorf("retry log line lacks the status or the error text, or repeats it: %s", l)
		}
	}
	if !strings.Contains(got.log, "retrying") {
		t.Errorf("no retry logged:\n%s", got.log)
	}
	// The api-key query reached the server as a query parameter.
	for _, r := range srv.Requests() {
		if r.Path != "/v1/chat/completions" {
			t.Errorf("path = %q", r.Path)
		}
	}
}

// TestStalledModelNotice: a model that stalls on every attempt leaves a notice
// saying in words that it stopped responding.
func TestStalledModelNotice(t *testing.T) {
	srv := openaitest.New(t)
	block := make(chan struct{})
	defer close(block)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Text: "half an answer", StallMidStream: block}
	})
	got := runToFailure(t, Provider{BaseURL: srv.URL(), Model: "m", IdleTimeout: 200 * time.Millisecond})
	if !strings.Contains(got.notice, "the model stopped responding") {
		t.Errorf("notice = %q", got.notice)
	}
	if n := len(srv.Requests()); n != 1+DefaultModelRetries {
		t.Errorf("requests = %d, want %d", n, 1+DefaultModelRetries)
	}
}

// TestContextLengthForeverEndsInOneNotice: a server that answers every request
// with a context-length error gets shorter requests until nothing more can
// go (here: at once, the thread is one message), then the thread gets one notice that says the request is too
// long; no loop, no second notice.
func TestContextLengthForeverEndsInOneNotice(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.ContextLengthError() })
	got := runToFailure(t, Provider{BaseURL: srv.URL(), Model: "m"})
	if !strings.Contains(got.notice, "too long for the model's context window") {
		t.Errorf("notice = %q", got.notice)
	}
	reqs := srv.Requests()
	if len(reqs) > 10 {
		t.Errorf("requests = %d, want a few shorter retries", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if len(reqs[i].Raw) >= len(reqs[i-1].Raw) {
			t.Errorf("request %d is not shorter than the one before (%d >= %d bytes)", i, len(reqs[i].Raw), len(reqs[i-1].Raw))
		}
	}
}
