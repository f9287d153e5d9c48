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
	"openbot/metrics"
	"openbot/store/bolt"
)

// recAdapter is a whole-team console account that records deliveries.
type recAdapter struct {
	mu  sync.Mutex
	got []string
}

func (r *recAdapter) Account() core.AccountID { return "console/local" }
func (r *recAdapter) Bot() string             { return "*" }
func (r *recAdapter) Deliver(_ context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d.Text)
	return fmt.Sprintf("p%d", len(r.got)), nil
}

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
	m   *metrics.Metrics
	eng *core.Engine
	ad  *recAdapter
	srv *openaitest.Server
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
	eng, err := core.New(core.Options{Store: st, Agent: agent, Observer: m, ShutdownGrace: 2 * time.Second,
		Bots: []core.BotProfile{{Handle: "chief_of_staff", Name: "Chief"}, {Handle: "engineer", Name: "Engineer"}}})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(eng)
	ad := &recAdapter{}
	if err := eng.AddAdapter(ad); err != nil {
		t.Fatal(err)
	}
	return &rig{m: m, eng: eng, ad: ad, srv: srv}
}

// run starts the engine until the test ends.
func (r *rig) run(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("engine Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("engine did not stop")
		}
	})
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
	for deadline := time.Now().Add(10 * time.Second); r.ad.count() < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// The delivery counter moves after the outbox entry settles; wait for it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if v, _ := value(scrape(t, hs.URL), "openbot_outbox_deliveries_total", "platform=console"); v >= 1 {
			break
		}
	}

	fams = scrape(t, hs.URL)
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
