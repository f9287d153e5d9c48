package core

import (
	"context"
	"time"
)

// LaneStats reports the engine's delivery lanes (tests only): how many exist, how
// many have a goroutine delivering, and how many outbox IDs their buffers can hold
// (capacity, so a buffer kept while idle shows).
func LaneStats(e *Engine) (lanes, running, buffered int) {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	for _, ln := range e.lanes.m {
		lanes++
		if ln.running {
			running++
		}
		buffered += cap(ln.queue)
	}
	return lanes, running, buffered
}

// KickOutbox wakes the outbox dispatcher (tests only), which also releases idle lanes.
func KickOutbox(e *Engine) { e.lanes.kick() }

// Pick starts up to k runs of the bot handle in one transaction, as its worker does
// (tests only); the engine need not be running.
func Pick(ctx context.Context, e *Engine, handle string, k int) ([]*Job, error) {
	bot, ok := e.bot(handle)
	if !ok {
		return nil, ErrNotFound
	}
	return e.sched.pick(ctx, bot, nil, k)
}

// LaneWorkers is how many lanes of one account deliver at once (tests only).
const LaneWorkers = laneWorkers

// OnStreamStop makes every stream's finish call f once its loop was told to stop
// (tests only, before the engine starts); nil removes it.
func OnStreamStop(f func()) { streamStopHook = f }

// OnStreamPass makes every stream's loop call f after each pass over its
// targets with the seq (1 for the first text, counting each change) of the text
// it looked at (tests only, before the engine starts); nil removes it.
func OnStreamPass(f func(seq uint64)) { streamPassHook = f }

// TakeLease takes or renews key for the engine's process, as HoldLease does
// (tests only); holder is the other process's id when it holds the lease.
func TakeLease(ctx context.Context, e *Engine, key string) (until time.Time, holder string, err error) {
	return e.cluster.takeLease(ctx, key)
}

// PickBusy is Pick by a worker that runs the bot in thread busy (tests only).
func PickBusy(ctx context.Context, e *Engine, handle string, k int, busy ThreadID) ([]*Job, error) {
	bot, ok := e.bot(handle)
	if !ok {
		return nil, ErrNotFound
	}
	return e.sched.pick(ctx, bot, func(t ThreadID) bool { return t == busy }, k)
}
