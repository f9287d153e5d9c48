package telegram

import (
	"context"
	"fmt"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// BatchEngine is implemented by an Engine that stores many inbound messages in
// one transaction (core.Engine.IngestBatch, DESIGN.md §4): one outcome per
// Inbound, in order, Err nil once that message is durable. The poller uses it
// when the Engine has it, and calls Ingest once per message otherwise.
type BatchEngine interface {
	IngestBatch(ctx context.Context, ins []core.Inbound) []core.IngestOutcome
}

// pendingUpdate is an update of a getUpdates answer that waits for the batch
// ingest: a plain message (in set) or an update with nothing to store (in nil).
type pendingUpdate struct {
	id int64
	in *core.Inbound
}

// updateBatch collects the updates of one getUpdates answer that need nothing but
// an ingest, so they are stored in one transaction; every other update (a click,
// a command the adapter answers itself, a message that ends a pending /new) is
// handled on its own, in update order, after the updates before it were stored.
type updateBatch struct {
	a       *Adapter
	pending []pendingUpdate
	// done is the offset every update below which is durable (or needs nothing).
	done int64
}

// add takes update u: queued when it only needs an ingest or nothing, else the
// queue is stored first and u handled alone. An error means u or a queued update
// was not stored; done then tells how far the answer got.
func (b *updateBatch) add(ctx context.Context, u update) error {
	me, ok := b.a.Self()
	if !ok {
		return errNotReady
	}
	if u.Message == nil && u.CallbackQuery == nil {
		b.pending = append(b.pending, pendingUpdate{id: u.UpdateID}) // ignored kinds (edits)
		return nil
	}
	if u.Message != nil {
		in, plain, err := b.a.plainInbound(ctx, me, u.Message)
		if err != nil {
			if ferr := b.flush(ctx); ferr != nil {
				return ferr
			}
			return err
		}
		if plain {
			b.pending = append(b.pending, pendingUpdate{id: u.UpdateID, in: in})
			return nil
		}
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	if err := b.a.handleUpdate(ctx, u); err != nil {
		return err
	}
	b.done = u.UpdateID + 1
	return nil
}

// flush stores the queued messages, in order, in one transaction when the engine
// can (BatchEngine) and advances done past every update up to the first one that
// failed; that error is returned.
func (b *updateBatch) flush(ctx context.Context) error {
	if len(b.pending) == 0 {
		return nil
	}
	pending := b.pending
	b.pending = nil
	var ins []core.Inbound
	for _, p := range pending {
		if p.in != nil {
			ins = append(ins, *p.in)
		}
	}
	errs := make([]error, len(ins))
	if be, ok := b.a.engine.(BatchEngine); ok && len(ins) > 0 {
		for i, o := range be.IngestBatch(ctx, ins) {
			errs[i] = o.Err
		}
	} else {
		for i, in := range ins {
			if _, err := b.a.engine.Ingest(ctx, in); err != nil {
				errs[i] = err
				break // the rest waits for the next poll, in order
			}
		}
	}
	k := 0
	for _, p := range pending {
		if p.in != nil {
			if err := errs[k]; err != nil {
				return fmt.Errorf("telegram: ingest %s: %w", p.in.DedupKey, err)
			}
			k++
		}
		b.done = p.id + 1
	}
	return nil
}

// plainInbound returns the Inbound of a message that needs nothing but an ingest,
// with plain true; plain false when the message is ignored (in nil) or needs more
// (a refusal, any command, a pending /new to end): handleMessage does those.
func (a *Adapter) plainInbound(ctx context.Context, me tgbotapi.User, m *message) (in *core.Inbound, plain bool, err error) {
	d := a.classify(me, m)
	switch {
	case d.ignore:
		return nil, true, nil
	case d.command != "":
		// Every command goes through handleMessage, which answers /help, /start,
		// /stop (and any later command) itself and handles /new's flag.
		return nil, false, nil
	}
	if ok, err := a.admitted(ctx, m, d, conversationOf(m)); err != nil || !ok {
		return nil, err == nil, err // refused and answered: nothing more to do
	}
	pending, err := a.pendingNew(ctx, conversationOf(m))
	if err != nil || pending {
		return nil, false, err
	}
	v := withCommandText(a.inboundOf(me, m, d), d)
	return &v, true, nil
}
