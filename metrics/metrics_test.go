package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
	"openbot/metrics"
	"openbot/store/bolt"
)

// recAdapter is a whole-team console account that records deliveries; fail,
// when set, decides the error of the n-th Deliver call (from 1).
type recAdapter struct {
	mu    sync.Mutex
	got   []string
	calls int
	fail  func(n int) error
}

func (r *recAdapter) Account() core.AccountID { return "console/local" }
func (r *recAdapter) Bot() string             { return "*" }
func (r *recAdapter) Deliver(_ context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		if err := r.fail(r.calls); err != nil {
			return "", err
		}
	}
	r.got = append(r.got, d.Text)
	return fmt.Sprintf("p%d", len(r.got)), nil
}

// deliveryErr is a core.DeliveryError.
type deliveryErr struct{ permanent bool }

func (e deliveryErr) Error() string {
	return fmt.Sprintf("delivery failed (permanent %v)", e.permanent)
}
func (e deliveryErr) Permanent() bool           { return e.permanent }
func (e deliveryErr) RetryAfter() time.Duration { return 0 }

func (r *recAdapter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// scrape GETs /metrics from url and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type = %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels include
// want ("k=v" pairs); counters, gauges and untyped read their value, histograms
// their sample count. ok is false when there is no such series.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// rig is a real engine (bolt store, agent loop, fake model) observed by Metrics.
type rig struct {
	st  *bolt.Store
	m   *metrics.Metrics
	eng *core.Engine
	ad  *recAdapter
	srv *openaitest.Server
	// changed is poked after every store commit and every delivery or run end
	// the engine reports: what moves the series waitFor waits on.
	changed chan struct{}
}

func (r *rig) poke() {
	select {
	case r.changed <- struct{}{}:
	default: // a poke is already pending
	}
}

// observed is the rig's Observer: Metrics, then a poke.
type observed struct {
	*metrics.Metrics
	r *rig
}

func (o observed) Delivery(platform, outcome string) {
	o.Metrics.Delivery(platform, outcome)
	o.r.poke()
}

func (o observed) RunEnded(bot string, status core.RunStatus, d time.Duration) {
	o.Metrics.RunEnded(bot, status, d)
	o.r.poke()
}

func newRig(t *testing.T) *rig {
	t.Helper()
	srv := openaitest.New(t)
	// One tool round trip (read_history), then the answer.
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if msgs := r.Body.Messages; msgs[len(msgs)-1].Role == "tool" {
			return openaitest.Text("done")
		}
		return openaitest.Calls(openaitest.Call("read_history", `{"limit":5}`))
	})
	agent, err := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: srv.URL(), Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := metrics.New(metrics.Options{})
	r := &rig{st: st, m: m, ad: &recAdapter{}, srv: srv, changed: make(chan struct{}, 1)}
	st.OnCommit(func(writes int, d time.Duration) {
		m.StoreCommit(writes, d)
		r.poke()
	})
	eng, err := core.New(core.Options{Store: st, Agent: agent, Observer: observed{m, r}, ShutdownGrace: 2 * time.Second,
		Bots: []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}, {Handle: "engineer", Name: "Engineer"}}})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(eng)
	if err := eng.AddAdapter(r.ad); err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	return r
}

// run starts the engine until the test ends.
func (r *rig) run(t *testing.T) context.Context {
	ctx, _ := runtest.Start(t, r.eng.Run)
	return ctx
}

func inbound(key, text string) core.Inbound {
	return core.Inbound{Account: "console/local", Platform: "console", DedupKey: key,
		ThreadKey: "console:main", Conversation: "main", PlatformID: key,
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}
}

// TestScriptedRunMovesCounters drives one run through the real engine and the
// fake model (a tool call, then an answer) and checks that /metrics parses and
// that every counter the run touches moved: inbound ingested, duplicate and
// dropped, runs, model calls and tokens, tool calls, outbox deliveries; and the
// scrape-time mailbox depth before and after (DESIGN.md §10, Metrics).
func TestScriptedRunMovesCounters(t *testing.T) {
	r := newRig(t)
	hs := httptest.NewServer(r.m.Handler())
	defer hs.Close()

	// Before any traffic the scrape parses and shows the idle mailboxes.
	fams := scrape(t, hs.URL)
	if v, ok := value(fams, "openbot_mailbox_depth", "bot=engineer"); !ok || v != 0 {
		t.Errorf("mailbox_depth{engineer} = %v, %v; want 0", v, ok)
	}

	// Queued before the engine runs: the scrape reads it from the store.
	ctx := context.Background()
	if _, err := r.eng.Ingest(ctx, inbound("console:1", "hello")); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, hs.URL)
	if v, _ := value(fams, "openbot_mailbox_depth", "bot=chief_of_staff"); v != 1 {
		t.Errorf("mailbox_depth{chief_of_staff} = %v before the run, want 1", v)
	}
	// A redelivery is a duplicate; a message for no thread that starts none is dropped.
	if res, err := r.eng.Ingest(ctx, inbound("console:1", "hello")); err != nil || !res.Duplicate {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
	drop := inbound("console:2", "not for us")
	drop.ThreadKey, drop.StartThread = "console:other", false
	if res, err := r.eng.Ingest(ctx, drop); err != nil || !res.Dropped {
		t.Fatalf("drop: %+v, %v", res, err)
	}
	// An adapter's refusal goes through the engine's observer.
	core.ReportInbound(r.eng, "slack", core.InboundRefused)

	rctx := r.run(t)
	wctx, wcancel := context.WithTimeout(rctx, 20*time.Second)
	defer wcancel()
	if err := r.eng.WaitIdle(wctx); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	// The delivery counter moves after the outbox entry settles; wait for it.
	fams = r.waitFor(t, hs.URL, "openbot_outbox_deliveries_total", 1, "platform=console")
	if n := r.ad.count(); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"openbot_inbound_messages_total", []string{"platform=console", "outcome=ingested"}, 1},
		{"openbot_inbound_messages_total", []string{"platform=console", "outcome=duplicate"}, 1},
		{"openbot_inbound_messages_total", []string{"platform=console", "outcome=dropped"}, 1},
		{"openbot_inbound_messages_total", []string{"platform=slack", "outcome=refused"}, 1},
		{"openbot_ingest_duration_seconds", []string{"platform=console"}, 3},
		{"openbot_runs_started_total", []string{"bot=chief_of_staff"}, 1},
		{"openbot_runs_total", []string{"bot=chief_of_staff", "status=completed"}, 1},
		{"openbot_run_duration_seconds", []string{"bot=chief_of_staff"}, 1},
		{"openbot_model_calls_total", []string{"profile=default", "model=m"}, 2},
		{"openbot_model_call_duration_seconds", []string{"profile=default", "model=m"}, 2},
		{"openbot_tool_calls_total", []string{"tool=read_history", "outcome=ok"}, 1},
		{"openbot_tool_call_duration_seconds", []string{"tool=read_history"}, 1},
		{"openbot_outbox_deliveries_total", []string{"platform=console"}, 1},
		{"openbot_mailbox_depth", []string{"bot=chief_of_staff"}, 0},
		{"openbot_outbox_pending", nil, 0},
	}
	for _, c := range checks {
		if v, ok := value(fams, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	for _, kind := range []string{"prompt", "completion"} {
		if v, _ := value(fams, "openbot_model_tokens_total", "profile=default", "model=m", "kind="+kind); v <= 0 {
			t.Errorf("model_tokens_total{%s} = %v, want > 0", kind, v)
		}
	}
	// The store's group commits, each observed once (read after the scrape,
	// the store's totals may have moved on since).
	stats := r.st.CommitStats()
	if v, ok := value(fams, "openbot_store_commit_duration_seconds"); !ok || v == 0 || v > float64(stats.Commits) {
		t.Errorf("store_commit_duration_seconds count = %v (present %v), want some of the store's %d commits", v, ok, stats.Commits)
	}
	if f := fams["openbot_store_commit_writes"]; f == nil || len(f.GetMetric()) != 1 ||
		f.GetMetric()[0].GetHistogram().GetSampleSum() == 0 || f.GetMetric()[0].GetHistogram().GetSampleSum() > float64(stats.Writes) {
		t.Errorf("store_commit_writes = %v, want a sum of some of the store's %d writes", f, stats.Writes)
	}
	if v, ok := value(fams, "openbot_model_call_errors_total"); ok && v != 0 {
		t.Errorf("model_call_errors_total = %v, want none", v)
	}
	// No label carries a thread, message or user id.
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "console:") {
					t.Errorf("%s has a high-cardinality label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestModelErrorsAndFailedRun counts a model error by profile and model and the
// run it fails by its final status.
func TestModelErrorsAndFailedRun(t *testing.T) {
	r := newRig(t)
	r.srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Error(400, "bad request") })
	ctx := r.run(t)
	if _, err := r.eng.Ingest(ctx, inbound("console:1", "hello")); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := r.eng.WaitIdle(wctx); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	hs := httptest.NewServer(r.m.Handler())
	defer hs.Close()
	fams := scrape(t, hs.URL)
	if v, _ := value(fams, "openbot_model_call_errors_total", "profile=default", "model=m"); v != 1 {
		t.Errorf("model_call_errors_total = %v, want 1", v)
	}
	if v, _ := value(fams, "openbot_runs_total", "bot=chief_of_staff", "status=failed"); v != 1 {
		t.Errorf("runs_total{failed} = %v, want 1", v)
	}
}

// TestMCPState keeps one series per state, 1 for the current one.
func TestMCPState(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.MCPState("files", "starting")
	m.MCPState("files", "running")
	hs := httptest.NewServer(m.Handler())
	defer hs.Close()
	fams := scrape(t, hs.URL)
	var on []string
	for _, s := range []string{"starting", "running", "failed", "stopped"} {
		v, ok := value(fams, "openbot_mcp_server_state", "server=files", "state="+s)
		if !ok {
			t.Errorf("no series for state %s", s)
		}
		if v == 1 {
			on = append(on, s)
		}
	}
	sort.Strings(on)
	if strings.Join(on, ",") != "running" {
		t.Errorf("states at 1 = %v, want running", on)
	}
	m.ForgetMCP("files")
	if _, ok := value(scrape(t, hs.URL), "openbot_mcp_server_state", "server=files"); ok {
		t.Error("a forgotten server still has series")
	}
}

// waitFor scrapes until the series reaches want, again after each change the
// rig sees, and returns the last scrape (after 15 s without it, as it is).
func (r *rig) waitFor(t *testing.T, url, name string, want float64, labels ...string) map[string]*dto.MetricFamily {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		fams := scrape(t, url)
		if v, _ := value(fams, name, labels...); v >= want {
			return fams
		}
		select {
		case <-r.changed:
		case <-timeout:
			return fams
		}
	}
}

// TestDeliveryRetriesAndFailures counts a retried attempt and a permanent
// failure by platform, besides the deliveries.
func TestDeliveryRetriesAndFailures(t *testing.T) {
	r := newRig(t)
	r.srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("hi") })
	// The first reply fails once and then lands; the second fails for good.
	r.ad.fail = func(n int) error {
		switch n {
		case 1:
			return deliveryErr{}
		case 3:
			return deliveryErr{permanent: true}
		}
		return nil
	}
	hs := httptest.NewServer(r.m.Handler())
	defer hs.Close()
	ctx := r.run(t)
	if _, err := r.eng.Ingest(ctx, inbound("console:1", "one")); err != nil {
		t.Fatal(err)
	}
	fams := r.waitFor(t, hs.URL, "openbot_outbox_deliveries_total", 1, "platform=console")
	if v, _ := value(fams, "openbot_outbox_retries_total", "platform=console"); v != 1 {
		t.Errorf("outbox_retries_total = %v, want 1", v)
	}
	if _, err := r.eng.Ingest(ctx, inbound("console:2", "two")); err != nil {
		t.Fatal(err)
	}
	fams = r.waitFor(t, hs.URL, "openbot_outbox_failures_total", 1, "platform=console")
	for name, want := range map[string]float64{"openbot_outbox_failures_total": 1, "openbot_outbox_deliveries_total": 1, "openbot_outbox_retries_total": 1} {
		if v, _ := value(fams, name, "platform=console"); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// TestQuestionGaugesAndAnswers: a run that asks a person ends as waiting_human,
// the pending question and the parked run show at scrape time, and the answer
// is counted; the resumed run completes.
func TestQuestionGaugesAndAnswers(t *testing.T) {
	r := newRig(t)
	r.srv.Handle(func(req openaitest.Request) openaitest.Reply {
		if msgs := req.Body.Messages; msgs[len(msgs)-1].Role == "tool" {
			return openaitest.Text("thanks")
		}
		return openaitest.Calls(openaitest.Call("ask_human", `{"question":"ship it?","choices":["yes","no"]}`))
	})
	hs := httptest.NewServer(r.m.Handler())
	defer hs.Close()
	ctx := r.run(t)
	if _, err := r.eng.Ingest(ctx, inbound("console:1", "please ask me")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, hs.URL, "openbot_questions_pending", 1, "bot=chief_of_staff", "kind=ask")
	// The run's end is counted once its pause has committed, a moment after
	// the question shows.
	fams := r.waitFor(t, hs.URL, "openbot_runs_total", 1, "bot=chief_of_staff", "status=waiting_human")
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"openbot_questions_pending", []string{"bot=chief_of_staff", "kind=ask"}},
		{"openbot_runs_active", []string{"bot=chief_of_staff", "status=waiting_human"}},
		{"openbot_runs_total", []string{"bot=chief_of_staff", "status=waiting_human"}},
	} {
		if v, _ := value(fams, c.name, c.labels...); v != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, v)
		}
	}
	qs, err := r.eng.Questions(ctx, true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions: %v, %v", qs, err)
	}
	res, err := r.eng.Answer(ctx, core.Answer{Question: qs[0].ID, Choice: 0, Actor: "console:you", Name: "you", Account: "console/local"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer: %+v, %v", res, err)
	}
	fams = r.waitFor(t, hs.URL, "openbot_runs_total", 1, "bot=chief_of_staff", "status=completed")
	if v, _ := value(fams, "openbot_runs_total", "bot=chief_of_staff", "status=completed"); v != 1 {
		t.Errorf("runs_total{completed} = %v, want 1", v)
	}
	if v, _ := value(fams, "openbot_question_answers_total", "outcome=accepted"); v != 1 {
		t.Errorf("question_answers_total{accepted} = %v, want 1", v)
	}
	if v, _ := value(fams, "openbot_questions_pending", "bot=chief_of_staff"); v != 0 {
		t.Errorf("questions_pending = %v after the answer, want none", v)
	}
}
