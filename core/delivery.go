package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"openbot/internal/waitctx"
)

// Delivery of one outbox entry (DESIGN.md §4): the lanes (core/outbox.go) call
// deliver for each entry in turn; it reads the entry, builds the adapter call
// (a message, a file, a question with buttons or its decision), retries it,
// reroutes a refused own account, and settles the entry with its platform id.

// deliver sends outbox entry id, retrying with backoff (or the platform's
// RetryAfter) until it lands, fails permanently, runs out of tries, or ctx ends
// (the entry then stays pending for the next start).
func (l *lanes) deliver(ctx context.Context, ln *lane, id OutboxID) {
	// The entry is read now, when its turn comes: lanes keep only IDs, and the
	// sweep that queued it may have run before an earlier delivery of the same
	// entry settled, so nothing is delivered twice.
	var o OutboxEntry
	if err := l.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		o, err = tx.Outbox(id)
		return err
	}); err != nil || o.Status != OutboxPending {
		return
	}
	ad, ok := l.e.adapter(o.Account)
	if !ok {
		l.settle(ctx, o, "", fmt.Errorf("no adapter for account %q", o.Account), true)
		return
	}
	send, err := l.sender(ctx, ad, o)
	if err != nil {
		if ctx.Err() == nil {
			l.settle(ctx, o, "", err, true)
		}
		return
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 500*time.Millisecond, 30*time.Second, 0
	for try := 1; ; try++ {
		if !l.holds(ln) {
			return // shared: the lane's lease was lost; its holder delivers the entry
		}
		dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
		pid, err := send(dctx)
		cancel()
		if err == nil {
			l.settle(ctx, o, pid, nil, false)
			return
		}
		if ctx.Err() != nil {
			return
		}
		var de DeliveryError
		isDE := errors.As(err, &de)
		if isDE && de.Permanent() && l.reroute(ctx, o, ad, err) {
			return
		}
		if (isDE && de.Permanent()) || try >= maxDeliverTries {
			l.settle(ctx, o, "", err, true)
			return
		}
		wait := bo.NextBackOff()
		if isDE && de.RetryAfter() > 0 {
			wait = de.RetryAfter()
		}
		observeDelivery(l.e.Observe(), o.Account, "retry")
		l.e.log.Warn("delivery failed; retrying", "account", o.Account, "outbox", o.ID, "try", try, "wait", wait, "err", Redact(err.Error()))
		o.Attempts, o.Error = try, Redact(err.Error())
		if err := l.e.store.Update(ctx, func(tx Tx) error { _, err := tx.PutOutbox(o); return err }); err != nil && ctx.Err() == nil {
			l.e.log.Error("outbox update", "err", err)
		}
		if waitctx.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// reroute handles a bot's own account being refused in a conversation (not a
// member, DESIGN.md §3): the entry goes back to pending through another account of
// the binding, which shows the bot's name, and the refused account is forgotten
// for this binding, so later messages take the other account directly. It reports
// whether it rerouted; a whole-team account's failure is not rerouted.
func (l *lanes) reroute(ctx context.Context, o OutboxEntry, ad Adapter, cause error) bool {
	if ad.Bot() == "*" {
		return false
	}
	rerouted := false
	err := l.e.store.Update(ctx, func(tx Tx) error {
		rerouted = false
		sender, err := l.senderOf(tx, o)
		if err != nil || sender != BotActorID(ad.Bot()) {
			return err
		}
		t, err := tx.Thread(o.Thread)
		if err != nil {
			return err
		}
		for i, b := range t.Bindings {
			if b.Conversation != o.Conversation || !slices.Contains(b.Accounts, o.Account) {
				continue
			}
			var alt AccountID
			for _, a := range b.Accounts {
				if _, ok := l.e.adapter(a); ok && a != o.Account && alt == "" {
					alt = a
				}
			}
			if alt == "" {
				return nil
			}
			t.Bindings[i].Accounts = slices.DeleteFunc(slices.Clone(b.Accounts), func(a AccountID) bool { return a == o.Account })
			if _, err := tx.PutThread(t); err != nil {
				return err
			}
			cur, err := tx.Outbox(o.ID)
			if err != nil {
				return err
			}
			cur.Account, cur.Status, cur.Error = alt, OutboxPending, fmt.Sprintf("%s refused (%v); sent through %s", o.Account, cause, alt)
			cur.Streamed = nil // streamed through the refused account: post anew
			if _, err := tx.PutOutbox(cur); err != nil {
				return err
			}
			if cur.Op == OpQuestion {
				if err := updatePostTx(tx, o, func(p *QuestionPost) { p.Account = alt }); err != nil {
					return err
				}
			}
			l.e.activity(tx, Activity{Event: "outbox.rerouted", Level: "warn", Summary: cur.Error, Thread: o.Thread, Message: o.Message})
			rerouted = true
			return nil
		}
		return nil
	})
	if err != nil {
		l.e.log.Error("outbox reroute", "outbox", o.ID, "err", err)
		return false
	}
	if rerouted {
		l.e.log.Warn("own account refused; rerouted", "account", o.Account, "outbox", o.ID, "err", cause)
		l.kick()
	}
	return rerouted
}

// senderOf is who an entry speaks for: the message's sender, or the asking bot.
func (l *lanes) senderOf(tx ReadTx, o OutboxEntry) (ActorID, error) {
	if o.Op != OpMessage && o.Op != OpFile {
		q, err := tx.Question(o.Question)
		return q.Bot, err
	}
	m, err := tx.Message(o.Message)
	return m.Sender, err
}

// sender returns the call that delivers entry o through ad: a message, a question
// with buttons (QuestionAdapter.PostQuestion), a decision replacing them
// (ResolveQuestion), or for adapters without buttons the plain-text rendering.
func (l *lanes) sender(ctx context.Context, ad Adapter, o OutboxEntry) (func(context.Context) (string, error), error) {
	if o.Op == OpFile {
		return l.fileSender(ctx, ad, o)
	}
	if o.Op == OpMessage {
		d, err := l.delivery(ctx, o)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (string, error) { return ad.Deliver(ctx, d) }, nil
	}
	var qd QuestionDelivery
	err := l.e.store.View(ctx, func(tx ReadTx) error {
		q, err := tx.Question(o.Question)
		if err != nil {
			return err
		}
		handle := strings.TrimPrefix(string(q.Bot), "bot:")
		qd = QuestionDelivery{Outbox: o.ID, Conversation: o.Conversation, ReplyTo: o.ReplyTo, Question: q,
			Sender: Sender{Actor: q.Bot, Handle: handle, Name: displayName(l.e.cfg().bots[handle])}}
		for _, p := range q.Posts {
			if p.Account == o.Account && p.Conversation == o.Conversation {
				qd.PlatformID = p.PlatformID
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	qa, buttons := ad.(QuestionAdapter)
	switch {
	case o.Op == OpQuestion && buttons:
		return func(ctx context.Context) (string, error) { return qa.PostQuestion(ctx, qd) }, nil
	case o.Op == OpResolve && buttons && qd.PlatformID != "":
		return func(ctx context.Context) (string, error) { return qd.PlatformID, qa.ResolveQuestion(ctx, qd) }, nil
	}
	text := QuestionText(qd.Question, qd.Sender.Handle)
	if o.Op == OpResolve {
		text = fmt.Sprintf("Question %d: %s", qd.Question.ID, qd.Question.Decision())
	}
	d := Delivery{Outbox: o.ID, Thread: o.Thread, Conversation: o.Conversation, ReplyTo: o.ReplyTo,
		Sender: qd.Sender, Kind: KindNotice, Text: text}
	return func(ctx context.Context) (string, error) { return ad.Deliver(ctx, d) }, nil
}

// delivery loads what an adapter needs to post entry o.
func (l *lanes) delivery(ctx context.Context, o OutboxEntry) (Delivery, error) {
	d := Delivery{Outbox: o.ID, Thread: o.Thread, Message: o.Message, Conversation: o.Conversation, ReplyTo: o.ReplyTo,
		Streamed: o.Streamed}
	err := l.e.store.View(ctx, func(tx ReadTx) error {
		m, err := tx.Message(o.Message)
		if err != nil {
			return err
		}
		d.Text, d.Kind = m.Text, m.Kind
		d.Sender = Sender{Actor: m.Sender, Name: m.SenderName}
		if m.Sender == SystemActor {
			d.Sender.Name = "system"
		}
		if h, ok := strings.CutPrefix(string(m.Sender), "bot:"); ok {
			d.Sender.Handle = h
		}
		return nil
	})
	return d, err
}

// settle records the outcome of an entry: delivered with its platform id, or failed.
//
// It commits through Batch (group commit, DESIGN.md §7), so the lanes' settles share
// commits; fn re-reads the entry inside tx, so a re-run by Batch writes the same.
func (l *lanes) settle(ctx context.Context, o OutboxEntry, pid string, derr error, failed bool) {
	err := l.e.store.Batch(ctx, func(tx Tx) error {
		cur, err := tx.Outbox(o.ID)
		if err != nil {
			return err
		}
		if failed {
			cur.Status, cur.Error = OutboxFailed, Redact(derr.Error())
			l.e.activity(tx, Activity{Event: "outbox.failed", Level: "error", Summary: fmt.Sprintf("delivery to %s failed: %s", o.Account, Redact(derr.Error())), Thread: o.Thread, Message: o.Message})
		} else {
			cur.Status, cur.PlatformID, cur.Error = OutboxDelivered, pid, ""
			if cur.Op == OpQuestion {
				// Where the question was shown, so its decision can replace it.
				if err := updatePostTx(tx, cur, func(p *QuestionPost) { p.PlatformID = pid }); err != nil {
					return err
				}
			}
			// Remember the delivered message's platform identity, so a reply to it
			// joins this thread (Inbound.ReplyToKey).
			if err := l.rememberPlatformID(tx, cur, pid); err != nil {
				return err
			}
			if cur.Opens {
				if err := l.openThreadTx(tx, cur, pid); err != nil {
					return err
				}
			}
		}
		cur.Attempts++
		_, err = tx.PutOutbox(cur)
		return err
	})
	if err != nil && ctx.Err() == nil {
		l.e.log.Error("outbox settle", "outbox", o.ID, "err", err)
	}
	observeDelivery(l.e.Observe(), o.Account, settleOutcome(failed))
	if failed {
		l.e.log.Error("delivery failed for good", "account", o.Account, "outbox", o.ID, "err", Redact(derr.Error()))
	}
}

// openThreadTx moves the binding that entry o, the first message of a thread
// started from outside its conversation, was delivered to into the platform
// thread under that message (ThreadOpener), binds the platform thread's key to
// the thread, and moves the thread's entries still pending in the old
// conversation along (each lane reads its entry when its turn comes, so they
// are posted in the platform thread, in order).
func (l *lanes) openThreadTx(tx Tx, o OutboxEntry, pid string) error {
	ad, ok := l.e.adapter(o.Account)
	if !ok || pid == "" {
		return nil
	}
	op, ok := ad.(ThreadOpener)
	if !ok {
		return nil
	}
	conv, key, ok := op.OpenThread(o.Conversation, pid)
	if !ok {
		return nil
	}
	t, err := tx.Thread(o.Thread)
	if err != nil {
		return err
	}
	for i := range t.Bindings {
		if t.Bindings[i].Conversation == o.Conversation {
			t.Bindings[i].Conversation = conv
		}
	}
	if _, err := tx.PutThread(t); err != nil {
		return err
	}
	if key != "" {
		if err := tx.BindThreadKey(key, t.ID); err != nil {
			return err
		}
	}
	const page = 256
	for after := o.ID; ; {
		pend, err := tx.PendingOutbox(after, page)
		if err != nil {
			return err
		}
		for _, p := range pend {
			if p.Thread == o.Thread && p.Conversation == o.Conversation {
				p.Conversation = conv
				if _, err := tx.PutOutbox(p); err != nil {
					return err
				}
			}
		}
		if len(pend) < page {
			break
		}
		after = pend[len(pend)-1].ID
	}
	l.e.activity(tx, Activity{Event: "thread.opened", Summary: fmt.Sprintf("thread opened under its first message in %s", o.Account), Thread: o.Thread, Message: o.Message})
	return nil
}

// rememberPlatformID records the platform identity of a delivered message or
// question (MessageKeyer) against a message of its thread, so a person's reply
// to either joins the thread (DESIGN.md §3). A question has no message of its
// own; its key points at the thread's newest message, which serves the same
// purpose: only the message's thread is looked up.
func (l *lanes) rememberPlatformID(tx Tx, o OutboxEntry, pid string) error {
	if pid == "" || (o.Op != OpMessage && o.Op != OpQuestion && o.Op != OpFile) {
		return nil
	}
	mk, ok := l.adapterKeyer(o.Account)
	if !ok {
		return nil
	}
	key := mk.MessageKey(o.Conversation, pid)
	if key == "" {
		return nil
	}
	mid := o.Message
	if mid == 0 {
		newest, err := tx.MessagesBefore(o.Thread, 0, 1)
		if err != nil || len(newest) == 0 {
			return err
		}
		mid = newest[0].ID
	}
	return tx.MarkSeen(key, mid)
}

func (l *lanes) adapterKeyer(id AccountID) (MessageKeyer, bool) {
	ad, ok := l.e.adapter(id)
	if !ok {
		return nil, false
	}
	mk, ok := ad.(MessageKeyer)
	return mk, ok
}

// updatePostTx applies f to the post of o's question shown through o's account
// and conversation, and stores the question.
func updatePostTx(tx Tx, o OutboxEntry, f func(*QuestionPost)) error {
	q, err := tx.Question(o.Question)
	if err != nil {
		return err
	}
	for i, p := range q.Posts {
		if p.Account == o.Account && p.Conversation == o.Conversation {
			f(&q.Posts[i])
		}
	}
	_, err = tx.PutQuestion(q)
	return err
}
