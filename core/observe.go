package core

import (
	"context"
	"strings"
	"time"
)

// Observer receives the engine's operational events for monitoring (DESIGN.md
// §10, Metrics). Core imports no metrics library: it calls an Observer,
// and cmd passes one built by the metrics package (Options.Observer). Every
// method must be safe for concurrent use, cheap and non-blocking: it is called
// on the hot path, sometimes while a delivery lane or a worker waits. Labels
// passed are low-cardinality by construction: platforms, bot handles, LLM
// profile and model names from the configuration, tool names the run offered,
// fixed outcome words; never thread, message or user ids.
type Observer interface {
	// Inbound counts one inbound platform event by platform ("slack",
	// "telegram", "feishu", "console") and outcome (the Inbound* constants).
	Inbound(platform, outcome string)
	// IngestLatency observes how long Engine.Ingest took for one stored message.
	IngestLatency(platform string, d time.Duration)
	// RunStarted counts a run picked up by a bot's worker (new, resumed or
	// restarted).
	RunStarted(bot string)
	// RunEnded counts a settled run by its final status ("completed", "failed",
	// "waiting_human", "cancelled") and observes its wall time in this process.
	RunEnded(bot string, status RunStatus, d time.Duration)
	// ModelCall observes one model call of a run: its LLM profile and model, its
	// duration, the tokens the provider reported, and whether it failed.
	ModelCall(profile, model string, d time.Duration, promptTokens, completionTokens int, failed bool)
	// ToolCall observes one tool call by tool name and outcome ("ok", "error");
	// a name the run did not offer arrives as "unknown".
	ToolCall(tool, outcome string, d time.Duration)
	// Delivery counts an outbox event by platform and outcome: "delivered",
	// "retry" (one failed attempt that will be tried again) or "failed"
	// (permanent failure, not retried).
	Delivery(platform, outcome string)
	// Answer counts a question decision by outcome: the AnswerOutcome of a
	// person's answer, or "expired".
	Answer(outcome string)
}

// Inbound outcomes for Observer.Inbound.
const (
	InboundIngested  = "ingested"  // stored and routed
	InboundDuplicate = "duplicate" // dedup key seen before (a redelivery)
	InboundDropped   = "dropped"   // not for openbot, or malformed and acknowledged
	InboundRefused   = "refused"   // refused by an allow list or a failed signature
)

// NopObserver ignores everything; it is the default when Options.Observer is
// nil. Embed it to implement only part of Observer.
type NopObserver struct{}

// Inbound does nothing.
func (NopObserver) Inbound(string, string) {}

// IngestLatency does nothing.
func (NopObserver) IngestLatency(string, time.Duration) {}

// RunStarted does nothing.
func (NopObserver) RunStarted(string) {}

// RunEnded does nothing.
func (NopObserver) RunEnded(string, RunStatus, time.Duration) {}

// ModelCall does nothing.
func (NopObserver) ModelCall(string, string, time.Duration, int, int, bool) {}

// ToolCall does nothing.
func (NopObserver) ToolCall(string, string, time.Duration) {}

// Delivery does nothing.
func (NopObserver) Delivery(string, string) {}

// Answer does nothing.
func (NopObserver) Answer(string) {}

// Observe returns the engine's Observer (a NopObserver when none was set), for
// adapters that report refusals and drops (see ReportInbound).
func (e *Engine) Observe() Observer {
	if e == nil || e.observer == nil {
		return NopObserver{}
	}
	return e.observer
}

// ReportInbound reports an inbound outcome through eng's Observer when eng has
// one (an Observe() Observer method, as *Engine does); adapters call it at their
// refusal and drop points without depending on the metrics package, and test
// fakes of their Engine interface need not implement it.
func ReportInbound(eng any, platform, outcome string) {
	if o, ok := eng.(interface{ Observe() Observer }); ok {
		o.Observe().Inbound(platform, outcome)
	}
}

// Observer returns the Observer of the engine that runs this job (a NopObserver
// for a job built outside an engine, as in agent tests).
func (j *Job) Observer() Observer {
	if j == nil || j.observer == nil {
		return NopObserver{}
	}
	return j.observer
}

// observeIngest reports one successful Ingest: its outcome and latency.
func observeIngest(o Observer, platform string, start time.Time, res IngestResult) {
	switch {
	case res.Duplicate:
		o.Inbound(platform, InboundDuplicate)
	case res.Dropped:
		o.Inbound(platform, InboundDropped)
	default:
		o.Inbound(platform, InboundIngested)
	}
	o.IngestLatency(platform, time.Since(start))
}

// observeRunStart hands the job the engine's Observer, reports the start and
// returns the start time for observeRunEnd.
func (rn *runner) observeRunStart(job *Job) time.Time {
	job.observer = rn.e.Observe()
	job.observer.RunStarted(job.Bot.Handle)
	return time.Now()
}

// observeRunEnd reports a settled run. The status is the one execute stored:
// waiting_human for a pause, completed, or failed; a settlement that failed to
// commit counts as failed.
func (rn *runner) observeRunEnd(job *Job, start time.Time, res Result, err, serr error, cancelled bool) {
	status := RunCompleted
	switch {
	case cancelled:
		status = RunCancelled
	case err != nil || serr != nil:
		status = RunFailed
	case res.Pause != nil:
		status = RunWaitingHuman
	}
	rn.e.Observe().RunEnded(job.Bot.Handle, status, time.Since(start))
}

// observeDelivery reports an outbox outcome for the platform of account (the
// part of an AccountID before "/").
func observeDelivery(o Observer, account AccountID, outcome string) {
	platform, _, _ := strings.Cut(string(account), "/")
	o.Delivery(platform, outcome)
}

// settleOutcome is the Delivery outcome of a settled outbox entry.
func settleOutcome(failed bool) string {
	if failed {
		return "failed"
	}
	return "delivered"
}

// Gauges is a snapshot of the engine's queues, read from the store at scrape
// time rather than kept incrementally, so it is right after a restart.
type Gauges struct {
	// Mailbox is the number of queued inbox items per configured bot handle
	// (every configured bot is present, 0 when idle).
	Mailbox map[string]int
	// PendingQuestions counts pending questions by bot handle and kind
	// ("ask", "approval").
	PendingQuestions map[[2]string]int
	// Runs counts non-terminal runs by bot handle and status ("running",
	// "waiting_human", "queued").
	Runs map[[2]string]int
	// OutboxPending counts undelivered outbox entries, at most gaugeScanLimit.
	OutboxPending int
}

// gaugeScanLimit bounds the outbox entries Gauges counts per scrape.
const gaugeScanLimit = 100000

// Gauges reads the current queue sizes in one read transaction. Errors are
// store failures (and ctx's).
func (e *Engine) Gauges(ctx context.Context) (Gauges, error) {
	var g Gauges
	set := e.cfg()
	err := e.store.View(ctx, func(tx ReadTx) error {
		g = Gauges{Mailbox: map[string]int{}, PendingQuestions: map[[2]string]int{}, Runs: map[[2]string]int{}} // fn may run again (core.Store.View)
		for _, b := range set.order {
			g.Mailbox[b.Handle] = 0
		}
		items, err := tx.ItemsByStatus(ItemQueued)
		if err != nil {
			return err
		}
		for _, it := range items {
			if h := strings.TrimPrefix(string(it.Actor), "bot:"); set.knownBot(h) {
				g.Mailbox[h]++
			}
		}
		qs, err := tx.Questions(true, 0)
		if err != nil {
			return err
		}
		for _, q := range qs {
			g.PendingQuestions[[2]string{strings.TrimPrefix(string(q.Bot), "bot:"), string(q.Kind)}]++
		}
		for _, st := range []RunStatus{RunQueued, RunRunning, RunWaitingHuman} {
			runs, err := tx.RunsByStatus(st)
			if err != nil {
				return err
			}
			for _, r := range runs {
				g.Runs[[2]string{strings.TrimPrefix(string(r.Bot), "bot:"), string(st)}]++
			}
		}
		var after OutboxID
		for g.OutboxPending < gaugeScanLimit {
			page, err := tx.PendingOutbox(after, 1000)
			if err != nil {
				return err
			}
			g.OutboxPending += len(page)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].ID
		}
		return nil
	})
	return g, err
}
