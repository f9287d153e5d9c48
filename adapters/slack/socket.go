package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// Socket Mode tuning.
const (
	// socketQueue bounds events acked but not yet ingested. When it is full the
	// reader stops acking, so Slack redelivers instead of us dropping anything.
	socketQueue = 256
	// drainGrace is how long acked events may still be ingested after Run's ctx is
	// done; Slack does not redeliver an acked envelope.
	drainGrace = 5 * time.Second
)

// runSocketLoop keeps a Socket Mode connection up until ctx is done, reconnecting
// with backoff (1 s doubling to 2 min, reset after a connection that lasted a
// minute). It returns nil when ctx is done and the error when the app token is
// refused for good.
func (a *Adapter) runSocketLoop(ctx context.Context) error {
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
// acks every envelope the moment it arrives, before any other work (issue 3 item 2),
// and one processor that ingests acked events and answers acked button clicks
// (issue 7 item 3) in arrival order.
func (a *Adapter) runSocket(ctx context.Context) error {
	smc := socketmode.New(a.api, socketmode.OptionLog(slogPrinter{a.log}))
	sockCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The processor outlives the socket by up to drainGrace after ctx is done so
	// acked events are not lost; a mere reconnect does not stop it early.
	procCtx, procCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer procCancel()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(drainGrace, procCancel) })
	defer stopGrace()

	queue := make(chan socketItem, socketQueue)
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
		for it := range queue {
			if procCtx.Err() != nil {
				a.log.Error("slack event dropped at shutdown after ack", "type", it.kind())
				continue
			}
			if it.click != nil {
				a.notify(procCtx, a.handleClick(procCtx, *it.click, true))
				continue
			}
			if err := a.handleEvent(procCtx, it.event); err != nil {
				a.log.Error("slack event not stored", "err", err)
			}
		}
	})
	wg.Wait()
	return runErr
}

// readSocket acks and dispatches socketmode events until ctx is done.
func (a *Adapter) readSocket(ctx context.Context, smc *socketmode.Client, queue chan<- socketItem) {
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-smc.Events:
		}
		if evt.Request != nil && evt.Request.EnvelopeID != "" {
			if err := smc.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
				a.log.Warn("slack ack failed", "envelope", evt.Request.EnvelopeID, "err", err)
			}
		}
		switch evt.Type {
		case socketmode.EventTypeConnecting:
			a.log.Debug("slack socket mode connecting")
		case socketmode.EventTypeConnected:
			a.log.Info("slack socket mode connected")
		case socketmode.EventTypeHello:
			a.log.Debug("slack socket mode hello")
		case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError,
			socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
			a.log.Warn("slack socket mode error", "type", string(evt.Type), "data", errorOf(evt.Data))
		case socketmode.EventTypeInvalidAuth:
			a.log.Error("slack socket mode: invalid auth")
		case socketmode.EventTypeEventsAPI:
			ev, ok := evt.Data.(slackevents.EventsAPIEvent)
			if !ok {
				continue
			}
			if evt.Request.RetryAttempt > 0 {
				a.log.Debug("slack envelope retry", "attempt", evt.Request.RetryAttempt, "reason", evt.Request.RetryReason)
			}
			select {
			case queue <- socketItem{event: ev}:
			case <-ctx.Done():
				return
			}
		case socketmode.EventTypeInteractive:
			cb, ok := evt.Data.(slack.InteractionCallback)
			if !ok {
				continue
			}
			select {
			case queue <- socketItem{click: &cb}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// socketItem is one acked envelope waiting for the processor: an Events API event
// or an interaction (a button click).
type socketItem struct {
	event slackevents.EventsAPIEvent
	click *slack.InteractionCallback
}

func (it socketItem) kind() string {
	if it.click != nil {
		return "interactive"
	}
	return it.event.InnerEvent.Type
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
