package core

import (
	"context"
	"time"
)

// runWork is the work indicator (WorkIndicator) of one run. Its start is sent on a
// goroutine of its own, so the platform call (a Slack reaction, Telegram's typing
// action, up to workTimeout per binding) never delays the model request: the event
// -> model request overhead of DESIGN.md §7 holds no platform round trip. Its end
// is sent only after the start call has returned, so an adapter never hears the
// end before the start.
//
// The goroutine is owned by the run: execute calls end before it returns, and end
// waits for the goroutine. The start call's context is the run's, so a run that
// shutdown or CancelRun interrupts stops its start call at once; end also cancels a
// start still in flight (the run is over; showing that it began is moot). So a run
// never outlives its own bounded settle by more than an adapter's reaction to
// cancellation.
type runWork struct {
	rn     *runner
	job    *Job
	cancel context.CancelFunc
	done   chan struct{} // closed when the start call returned; nil: none was made
}

// startWork begins showing that job's bot works, without waiting for the platform.
// No goroutine starts when no binding's account shows work.
func (rn *runner) startWork(ctx context.Context, job *Job) *runWork {
	w := &runWork{rn: rn, job: job}
	if !rn.showsWork(job) {
		return w
	}
	sctx, cancel := context.WithCancel(ctx)
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		rn.showWork(sctx, job, true)
	}()
	return w
}

// end stops a start still in flight, waits for it to return, then shows that the
// bot stopped working (each call bounded by workTimeout and ctx).
func (w *runWork) end(ctx context.Context) {
	if w.done != nil {
		w.cancel()
		<-w.done
	}
	w.rn.showWork(ctx, w.job, false)
}

// showsWork reports whether any binding of job's thread is served, for job's bot,
// by an account that implements WorkIndicator.
func (rn *runner) showsWork(job *Job) bool {
	for _, ba := range rn.replyAdapters(job) {
		if _, ok := ba.ad.(WorkIndicator); ok {
			return true
		}
	}
	return false
}

// boundAdapter is the account, and its adapter, that posts a bot's messages in
// one binding of a thread.
type boundAdapter struct {
	b    Binding
	acct AccountID
	ad   Adapter
}

// replyAdapters returns, for each binding of job's thread, the account that
// would post job's bot's reply there (pickAccount) and its adapter; bindings
// with none are left out.
func (rn *runner) replyAdapters(job *Job) []boundAdapter {
	var out []boundAdapter
	for _, b := range job.Thread.Bindings {
		acct, ok := rn.e.router.pickAccount(b, job.Bot.ID())
		if !ok {
			continue
		}
		if ad, ok := rn.e.adapter(acct); ok {
			out = append(out, boundAdapter{b: b, acct: acct, ad: ad})
		}
	}
	return out
}

// workTimeout bounds one WorkIndicator call.
const workTimeout = 3 * time.Second

// showWork tells every binding's account that supports it that job's bot started
// or stopped working (WorkIndicator), one call at a time, each bounded by
// workTimeout and ctx. Only runWork calls it.
func (rn *runner) showWork(ctx context.Context, job *Job, started bool) {
	replyTo := botReply(job, "").replyTo
	sender := Sender{Actor: job.Bot.ID(), Handle: job.Bot.Handle, Name: displayName(job.Bot)}
	for _, ba := range rn.replyAdapters(job) {
		wi, ok := ba.ad.(WorkIndicator)
		if !ok {
			continue
		}
		b := ba.b
		wctx, cancel := context.WithTimeout(ctx, workTimeout)
		wi.Working(wctx, Work{Conversation: b.Conversation, ReplyTo: replyTo[b.Conversation], Bot: sender,
			Thread: job.Thread.ID, Run: job.Run.ID, Started: started})
		cancel()
	}
}
