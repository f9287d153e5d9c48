// Package metrics exports openbot's operational metrics in the Prometheus text
// format (DESIGN.md §10, "Metrics"), with the official client library.
// It implements core.Observer, which core, agents and adapters call at the
// points that matter; queue sizes (mailbox depth, pending questions, active
// runs, pending outbox) are read from the store at scrape time (collector.go).
// Every label is low-cardinality: platforms, bot handles, LLM profiles and
// models, tool and MCP server names from the configuration, fixed outcome words.
// The metric names are listed in docs/ARCHITECTURE.md.
package metrics

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"openbot/core"
)

// Options configures Metrics. Every field is optional.
type Options struct {
	// ScrapeTimeout bounds the store read of one scrape; default 5s.
	ScrapeTimeout time.Duration
	// Logger receives store read failures during a scrape; nil discards.
	Logger *slog.Logger
}

// Metrics holds openbot's metrics in its own registry (nothing global). It
// implements core.Observer; the zero value is not usable, build it with New.
// All methods are safe for concurrent use.
type Metrics struct {
	reg   *prometheus.Registry
	gauge *gaugeCollector

	inbound       *prometheus.CounterVec
	ingest        *prometheus.HistogramVec
	runsStarted   *prometheus.CounterVec
	runs          *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	modelCalls    *prometheus.CounterVec
	modelErrors   *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	deliveries    *prometheus.CounterVec
	retries       *prometheus.CounterVec
	failures      *prometheus.CounterVec
	answers       *prometheus.CounterVec
	adminRefused  *prometheus.CounterVec
	mcpState      *prometheus.GaugeVec
	reconnects    *prometheus.CounterVec
	channelDown   *prometheus.GaugeVec
	commitTime    prometheus.Histogram
	commitWrites  prometheus.Histogram
}

var _ core.Observer = (*Metrics)(nil)

// mcpStates are the states an MCP server reports (agents/mcp ServerStatus.State).
var mcpStates = []string{"starting", "running", "failed", "stopped"}

// New builds the metrics and registers them, with the Go runtime and process
// collectors, in a fresh registry.
func New(opts Options) *Metrics {
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "openbot", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "openbot", Name: name, Help: help, Buckets: buckets}, labels)
	}
	long := []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	m := &Metrics{
		reg:           prometheus.NewRegistry(),
		gauge:         &gaugeCollector{timeout: opts.ScrapeTimeout, log: opts.Logger},
		inbound:       counter("inbound_messages_total", "Inbound platform messages by platform and outcome (ingested, duplicate, dropped, refused).", "platform", "outcome"),
		ingest:        histogram("ingest_duration_seconds", "Time Engine.Ingest took to store and route one inbound message.", prometheus.DefBuckets, "platform"),
		runsStarted:   counter("runs_started_total", "Runs picked up by a bot's worker (new, resumed or restarted).", "bot"),
		runs:          counter("runs_total", "Settled runs by bot and final status (completed, failed, waiting_human).", "bot", "status"),
		runDuration:   histogram("run_duration_seconds", "Wall time of a run from pick-up to settlement.", long, "bot"),
		modelCalls:    counter("model_calls_total", "Model calls by LLM profile and model.", "profile", "model"),
		modelErrors:   counter("model_call_errors_total", "Failed model calls by LLM profile and model.", "profile", "model"),
		modelDuration: histogram("model_call_duration_seconds", "Latency of one model call, the whole stream and its retries included.", long, "profile", "model"),
		tokens:        counter("model_tokens_total", "Tokens the provider reported, by LLM profile, model and kind (prompt, completion).", "profile", "model", "kind"),
		toolCalls:     counter("tool_calls_total", "Tool calls by tool and outcome (ok, error).", "tool", "outcome"),
		toolDuration:  histogram("tool_call_duration_seconds", "Duration of one tool call.", prometheus.DefBuckets, "tool"),
		deliveries:    counter("outbox_deliveries_total", "Outbox entries delivered, by platform.", "platform"),
		retries:       counter("outbox_retries_total", "Failed delivery attempts that are retried, by platform.", "platform"),
		failures:      counter("outbox_failures_total", "Outbox entries that failed for good (not retried), by platform.", "platform"),
		answers:       counter("question_answers_total", "Answers to questions by outcome (accepted, already_decided, forbidden, unknown, expired).", "outcome"),
		adminRefused:  counter("admin_token_refusals_total", "Refused admin tokens by door (login, bearer) and outcome (wrong_token, missing, throttled).", "door", "outcome"),
		mcpState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "openbot", Name: "mcp_server_state",
			Help: "1 for the current state of each MCP server (starting, running, failed, stopped), 0 for the others."}, []string{"server", "state"}),
		reconnects: counter("channel_watchdog_reconnects_total", "Reconnects of a platform account the watchdog found silent for longer than its limit, by account.", "account"),
		channelDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "openbot", Name: "channel_down",
			Help: "1 while the watchdog finds a platform account silent for longer than its limit, else 0, by account."}, []string{"account"}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "openbot", Name: "store_commit_duration_seconds",
			Help:    "Time the store's single writer spent on one group commit, its fsyncs included (bbolt store only).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}),
		commitWrites: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "openbot", Name: "store_commit_writes",
			Help:    "Writes (ingests, run steps, settles, deliveries) one group commit of the store carried (bbolt store only).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
	}
	m.reg.MustRegister(m.inbound, m.ingest, m.runsStarted, m.runs, m.runDuration, m.modelCalls, m.modelErrors,
		m.modelDuration, m.tokens, m.toolCalls, m.toolDuration, m.deliveries, m.retries, m.failures, m.answers,
		m.adminRefused, m.mcpState, m.reconnects, m.channelDown, m.commitTime, m.commitWrites, m.gauge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the metrics are in, for tests and for callers
// that add their own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format. A failed
// store read drops only the store gauges of that scrape; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: m.reg})
}

// Watch sets the source of the scrape-time gauges (mailbox depth, pending
// questions, active runs, pending outbox): normally the *core.Engine, which is
// built after Metrics because it takes Metrics as its Observer.
func (m *Metrics) Watch(src GaugeSource) { m.gauge.set(src) }

// Inbound implements core.Observer.
func (m *Metrics) Inbound(platform, outcome string) {
	m.inbound.WithLabelValues(platform, outcome).Inc()
}

// IngestLatency implements core.Observer.
func (m *Metrics) IngestLatency(platform string, d time.Duration) {
	m.ingest.WithLabelValues(platform).Observe(d.Seconds())
}

// StoreCommit records one group commit of the store: the writes it carried and
// its duration (bolt.Store.OnCommit, DESIGN.md §7 group commit). Slow syncs of
// the disk show in its duration first, and every ingest waits behind them.
func (m *Metrics) StoreCommit(writes int, d time.Duration) {
	m.commitTime.Observe(d.Seconds())
	m.commitWrites.Observe(float64(writes))
}

// RunStarted implements core.Observer.
func (m *Metrics) RunStarted(bot string) { m.runsStarted.WithLabelValues(bot).Inc() }

// RunEnded implements core.Observer.
func (m *Metrics) RunEnded(bot string, status core.RunStatus, d time.Duration) {
	m.runs.WithLabelValues(bot, string(status)).Inc()
	m.runDuration.WithLabelValues(bot).Observe(d.Seconds())
}

// ModelCall implements core.Observer.
func (m *Metrics) ModelCall(profile, model string, d time.Duration, promptTokens, completionTokens int, failed bool) {
	m.modelCalls.WithLabelValues(profile, model).Inc()
	if failed {
		m.modelErrors.WithLabelValues(profile, model).Inc()
	}
	m.modelDuration.WithLabelValues(profile, model).Observe(d.Seconds())
	m.tokens.WithLabelValues(profile, model, "prompt").Add(float64(max(promptTokens, 0)))
	m.tokens.WithLabelValues(profile, model, "completion").Add(float64(max(completionTokens, 0)))
}

// ToolCall implements core.Observer.
func (m *Metrics) ToolCall(tool, outcome string, d time.Duration) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(d.Seconds())
}

// Delivery implements core.Observer.
func (m *Metrics) Delivery(platform, outcome string) {
	switch outcome {
	case "delivered":
		m.deliveries.WithLabelValues(platform).Inc()
	case "retry":
		m.retries.WithLabelValues(platform).Inc()
	case "failed":
		m.failures.WithLabelValues(platform).Inc()
	}
}

// Answer implements core.Observer.
func (m *Metrics) Answer(outcome string) { m.answers.WithLabelValues(outcome).Inc() }

// AdminRefused counts a refused admin token (web.Options.OnRefused): door is
// "login" or "bearer", outcome "wrong_token", "missing" or "throttled".
func (m *Metrics) AdminRefused(door, outcome string) {
	m.adminRefused.WithLabelValues(door, outcome).Inc()
}

// MCPState records an MCP server's new state (agents/mcp Options.OnState):
// openbot_mcp_server_state{server,state} is 1 for state and 0 for the others.
func (m *Metrics) MCPState(server, state string) {
	for _, s := range mcpStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.mcpState.WithLabelValues(server, s).Set(v)
	}
}

// ChannelReconnect counts one watchdog reconnect of account ("telegram/chief").
func (m *Metrics) ChannelReconnect(account string) {
	m.reconnects.WithLabelValues(account).Inc()
}

// ChannelDown sets openbot_channel_down{account}: 1 while the watchdog finds
// the account silent, 0 once it hears from it again.
func (m *Metrics) ChannelDown(account string, down bool) {
	v := 0.0
	if down {
		v = 1
	}
	m.channelDown.WithLabelValues(account).Set(v)
}

// ForgetChannel removes an account's watchdog series, for an account a
// reload removed.
func (m *Metrics) ForgetChannel(account string) {
	m.reconnects.DeleteLabelValues(account)
	m.channelDown.DeleteLabelValues(account)
}

// ForgetMCP removes a server's state series, for a server a reload removed.
func (m *Metrics) ForgetMCP(server string) {
	m.mcpState.DeletePartialMatch(prometheus.Labels{"server": server})
}
