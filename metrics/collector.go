package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"openbot/core"
)

// GaugeSource reads the engine's queue sizes; *core.Engine implements it.
type GaugeSource interface {
	Gauges(ctx context.Context) (core.Gauges, error)
}

// gaugeCollector reads the queue gauges from the store at scrape time
// (core.Engine.Gauges), so they are right after a restart and need no
// bookkeeping on the hot path. One scrape is one read transaction, bounded by
// timeout.
type gaugeCollector struct {
	timeout time.Duration
	log     *slog.Logger

	mu  sync.Mutex
	src GaugeSource
}

var (
	mailboxDesc = prometheus.NewDesc("openbot_mailbox_depth",
		"Queued inbox items per configured bot.", []string{"bot"}, nil)
	questionsDesc = prometheus.NewDesc("openbot_questions_pending",
		"Pending questions (ask_human and approvals) by bot and kind.", []string{"bot", "kind"}, nil)
	activeRunsDesc = prometheus.NewDesc("openbot_runs_active",
		"Non-terminal runs by bot and status (queued, running, waiting_human).", []string{"bot", "status"}, nil)
	outboxDesc = prometheus.NewDesc("openbot_outbox_pending",
		"Outbox entries not delivered yet (counted up to 100000).", nil, nil)
)

func (c *gaugeCollector) set(src GaugeSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = src
}

// Describe implements prometheus.Collector.
func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mailboxDesc
	ch <- questionsDesc
	ch <- activeRunsDesc
	ch <- outboxDesc
}

// Collect implements prometheus.Collector. Without a source it sends nothing;
// a failed read is logged and reported as an invalid metric (the handler then
// serves the other metrics).
func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	g, err := src.Gauges(ctx)
	if err != nil {
		c.log.Warn("metrics: reading queue sizes failed", "err", err)
		ch <- prometheus.NewInvalidMetric(mailboxDesc, err)
		return
	}
	for bot, n := range g.Mailbox {
		ch <- prometheus.MustNewConstMetric(mailboxDesc, prometheus.GaugeValue, float64(n), bot)
	}
	for k, n := range g.PendingQuestions {
		ch <- prometheus.MustNewConstMetric(questionsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for k, n := range g.Runs {
		ch <- prometheus.MustNewConstMetric(activeRunsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(g.OutboxPending))
}
