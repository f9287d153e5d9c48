package core

import (
	"context"
	"errors"
	"time"
)

// IngestOutcome is the result of one Inbound of an IngestBatch call: Err is nil
// when the message is durable (stored, or recognised as a duplicate, or dropped as
// not for openbot), and then Result says what happened, as Ingest's does.
type IngestOutcome struct {
	Result IngestResult
	Err    error
}

// IngestBatch stores many inbound messages, in slice order, in one Store
// transaction (DESIGN.md §4, §7): each message gets exactly what Ingest would do
// for it (its own dedup key, thread, inbox items and outbox entries), so a later
// message sees the earlier ones, and a message whose DedupKey already appears
// earlier in the same batch is a duplicate. It is how an adapter that receives
// messages in batches (a Telegram getUpdates answer, Socket Mode envelopes that
// arrived together) avoids one commit per message.
//
// It returns one outcome per input, in the same order. An invalid Inbound gets its
// validation error without affecting the others. When the shared transaction
// fails (one message's store error rolls it back), every valid message is
// ingested again on its own through Ingest, so a failing message never loses the
// others; only the failing ones then carry an error. During shutdown every
// outcome is ErrStopped. An adapter confirms (acks, saves an offset past) only
// messages whose outcome has a nil Err.
func (e *Engine) IngestBatch(ctx context.Context, ins []Inbound) []IngestOutcome {
	return e.router.ingestBatch(ctx, ins)
}

// ingestBatch is Engine.IngestBatch.
func (rt *router) ingestBatch(ctx context.Context, ins []Inbound) []IngestOutcome {
	out := make([]IngestOutcome, len(ins))
	stopping := rt.e.isStopping()
	valid := make([]int, 0, len(ins))
	for i, in := range ins {
		switch err := validateInbound(in); {
		case err != nil:
			out[i].Err = err
		case stopping:
			out[i].Err = ErrStopped
		default:
			valid = append(valid, i)
		}
	}
	if len(valid) == 0 {
		return out
	}
	start := time.Now()
	results := make([]IngestResult, len(valid))
	err := rt.e.store.Batch(ctx, func(tx Tx) error {
		clear(results) // Batch may run fn again: the last run's results are the ones committed
		for k, i := range valid {
			res, err := rt.ingestTx(tx, ins[i])
			if err != nil {
				return err
			}
			results[k] = res
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrStopped) {
			for _, i := range valid {
				out[i].Err = err
			}
			return out
		}
		// One message broke the shared transaction: store each on its own, in
		// order, so only the failing ones fail.
		rt.e.log.Warn("batch ingest failed; storing its messages one by one", "messages", len(valid), "err", err)
		for _, i := range valid {
			out[i].Result, out[i].Err = rt.ingest(ctx, ins[i])
		}
		return out
	}
	var woken []string
	for k, i := range valid {
		out[i].Result = results[k]
		observeIngest(rt.e.Observe(), ins[i].Platform, start, results[k])
		if r := results[k]; len(ins[i].Attachments) > 0 && !r.Duplicate && !r.Dropped {
			rt.e.files.enqueue(r.Message) // core/files.go
		}
		woken = append(woken, results[k].Woken...)
	}
	rt.e.nudge(woken)
	return out
}
