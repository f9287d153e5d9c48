package slack

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"openbot/internal/keyed"
)

// Socket Mode tuning.
const (
	// socketQueue bounds envelopes received but not yet handled. None of them is
	// acked yet, so when the queue is full the reader simply stops reading and
	// Slack redelivers what it does not see acked within 3 s.
	socketQueue = 256
	// drainGrace bounds how long Run waits for background work (notices after a
	// click, working reactions) when it returns.
	drainGrace = 5 * time.Second
)

// runSocketLoop keeps a Socket Mode connection up until ctx is done, reconnecting
// with backoff (1 s doubling to 2 min, reset after a connection that lasted a
// minute). It returns nil when ctx is done and the error when the app token is
// refused for good. Pulse starts from when it is called.
func (a *Adapter) runSocketLoop(ctx context.Context) error {
	a.pulse.Store(time.Now().UnixNano())
	bo := newBackoff(time.Second, 2*time.Minute)
	for {
		start := time.Now()
		err := a.runSocket(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && permanentAuth(err) {
			a.log.Error("slack socket mode refused", "err", err)
			return err
		}
		if time.Since(start) > time.Minute {
			bo.reset()
		}
		d := bo.next()
		a.log.Warn("slack socket mode disconnected, reconnecting", "err", err, "in", d)
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// runSocket runs one socketmode.Client until it fails or ctx is done. Three
// goroutines, all joined before it returns: the client's RunContext, a reader that
// logs connection events and queues envelopes, and a dispatcher that hands the
// queued envelopes to handlers (keyed: in arrival order within a channel,
// concurrently across channels, at most socketParallel at once, all joined before
// it returns, so envelopes that arrive together share store commits instead of
// waiting for one commit each). Each envelope is acked only after its durable work
// is done (DESIGN.md §4, §8: no message Slack was told is received may be lost): an
// event after Engine.Ingest stored it, a button click after Engine.Answer stored
// the answer, a slash command after its effect is stored. An envelope whose
// storing fails is not acked, so Slack redelivers it and core deduplicates the
// redelivery. Envelopes still queued when the socket goes away are not acked
// either, for the same reason.
func (a *Adapter) runSocket(ctx context.Context) error {
	smc := socketmode.New(a.api, socketmode.OptionLog(slogPrinter{a.log}), socketmode.OptionDialer(a.pulseDialer()))
	sockCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.abandon.Store(&cancel)
	defer a.abandon.CompareAndSwap(&cancel, nil)

	queue := make(chan socketmode.Event, socketQueue)
	var (
		wg     sync.WaitGroup
		runErr error
	)
	wg.Go(func() {
		defer cancel()
		runErr = smc.RunContext(sockCtx)
	})
	wg.Go(func() {
		defer close(queue)
		a.readSocket(sockCtx, smc, queue)
	})
	wg.Go(func() {
		work := keyed.New(socketParallel)
		defer work.Wait()
		for evt := range queue {
			if sockCtx.Err() != nil {
				continue // not acked: Slack redelivers it to the next connection
			}
			work.Go(sockCtx, envelopeKey(evt), func() {
				if sockCtx.Err() == nil {
					a.handleEnvelope(sockCtx, smc, evt)
				}
			})
		}
	})
	wg.Wait()
	return runErr
}

// readSocket logs connection events and queues envelopes until ctx is done.
func (a *Adapter) readSocket(ctx context.Context, smc *socketmode.Client, queue chan<- socketmode.Event) {
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-smc.Events:
		}
		switch evt.Type {
		case socketmode.EventTypeConnecting:
			a.log.Debug("slack socket mode connecting")
			a.ingress.SetDown("socket mode connecting")
		case socketmode.EventTypeConnected:
			a.log.Info("slack socket mode connected")
		case socketmode.EventTypeHello:
			a.log.Debug("slack socket mode hello")
			a.ingress.SetDown("")
			a.ingress.MarkLive()
		case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError,
			socketmode.EventTypeErrorWriteFailed:
			a.log.Warn("slack socket mode error", "type", string(evt.Type), "err", errorOf(evt.Data))
			if evt.Type == socketmode.EventTypeConnectionError {
				a.ingress.SetDown("socket mode disconnected; reconnecting")
			}
		case socketmode.EventTypeInvalidAuth:
			a.log.Error("slack socket mode: invalid auth")
		case socketmode.EventTypeErrorBadMessage, socketmode.EventTypeEventsAPI,
			socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
			select {
			case queue <- evt:
			case <-ctx.Done():
				return
			}
		default:
			a.log.Debug("slack socket mode event", "type", string(evt.Type))
		}
	}
}

// handleEnvelope does the work of one envelope and acks it when that work is
// stored or when there is nothing to store (a malformed or foreign envelope is
// logged at WARN and acked, so Slack does not redeliver it forever).
func (a *Adapter) handleEnvelope(ctx context.Context, smc *socketmode.Client, evt socketmode.Event) {
	envelope := ""
	if evt.Request != nil {
		envelope = evt.Request.EnvelopeID
	}
	var (
		payload any
		after   func(context.Context)
	)
	switch evt.Type {
	case socketmode.EventTypeErrorBadMessage:
		envelope = badEnvelopeID(evt.Data)
		a.refuse("malformed socket mode envelope", "envelope", envelope, "err", errorOf(evt.Data))
	case socketmode.EventTypeEventsAPI:
		ev, ok := evt.Data.(slackevents.EventsAPIEvent)
		if !ok {
			a.refuse("events_api envelope without an event", "envelope", envelope)
			break
		}
		if evt.Request.RetryAttempt > 0 {
			a.log.Debug("slack envelope retry", "attempt", evt.Request.RetryAttempt, "reason", evt.Request.RetryReason)
		}
		if err := a.handleEvent(ctx, ev); err != nil {
			a.log.Error("slack event not stored, not acked so Slack redelivers it", "envelope", envelope, "err", err)
			return
		}
	case socketmode.EventTypeInteractive:
		cb, ok := evt.Data.(slack.InteractionCallback)
		if !ok {
			a.refuse("interactive envelope without a payload", "envelope", envelope)
			break
		}
		// Engine.Answer stores the answer (or fails, and the clicker is told so
		// privately); the ack follows, then the notice.
		after = a.handleClick(ctx, cb, true)
	case socketmode.EventTypeSlashCommand:
		cmd, ok := evt.Data.(slack.SlashCommand)
		if !ok {
			a.refuse("slash_commands envelope without a command", "envelope", envelope)
			break
		}
		reply, err := a.handleCommand(ctx, cmd)
		if err != nil {
			a.log.Error("slack command not stored, not acked", "envelope", envelope, "command", cmd.Command, "err", err)
			return
		}
		if reply != "" {
			payload = commandReply{ResponseType: "ephemeral", Text: reply}
		}
	}
	if envelope == "" {
		return
	}
	if err := smc.AckCtx(ctx, envelope, payload); err != nil {
		a.log.Warn("slack ack failed", "envelope", envelope, "err", err)
		return
	}
	a.notify(ctx, after)
}

// badEnvelopeID digs the envelope_id out of a frame slack-go could not parse.
func badEnvelopeID(data any) string {
	bm, ok := data.(*socketmode.ErrorBadMessage)
	if !ok {
		return ""
	}
	var env struct {
		EnvelopeID string `json:"envelope_id"`
	}
	if json.Unmarshal(bm.Message, &env) != nil {
		return ""
	}
	return env.EnvelopeID
}

// errorOf extracts a loggable error from socketmode's event data.
func errorOf(data any) any {
	switch d := data.(type) {
	case *slack.ConnectionErrorEvent:
		return d.ErrorObj
	case *slack.IncomingEventError:
		return d.ErrorObj
	case *socketmode.ErrorBadMessage:
		return d.Cause
	case *socketmode.ErrorWriteFailed:
		return d.Cause
	}
	return data
}
