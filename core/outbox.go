package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"openbot/internal/waitctx"
)

// Delivery lane limits (DESIGN.md §4 "delivery lanes", picobot's per-target lanes).
const (
	laneQueue        = 64               // entries waiting per lane; the rest wait in the store
	laneIdle         = 30 * time.Second // an idle lane is released after this long
	deliverTimeout   = 30 * time.Second // one Deliver call
	maxDeliverTries  = 8                // then the entry is marked failed
	dispatchInterval = time.Second      // sweep for entries that did not fit a lane
	dispatchPage     = 256
	// shrinkFrom is the fewest entries a lane map must have held before release
	// rebuilds it once it holds a quarter of that or less (shrink).
	shrinkFrom = 64
)

// laneWorkers is how many lanes of one account deliver at once; the others
// wait their turn, holding only their queue of IDs. A platform takes a bot's
// messages at tens a second at most (Telegram about 30), which 16 calls in
// flight keep up with, while a burst over thousands of conversations no longer
// costs a goroutine, a connection and their buffers per conversation (memory
// flat under bursts, DESIGN.md §9).
const laneWorkers = 16

type laneKey struct {
	account AccountID
	conv    ConversationRef
}

// lane is one ordered delivery queue (DESIGN.md §4): state per (account,
// conversation), made when the first entry arrives. Its queue holds only outbox
// IDs (the entry is read from the store when its turn comes) and grows as needed
// up to laneQueue; a goroutine delivers it only while the queue is not empty,
// and at most laneWorkers lanes of an account have one (the rest wait, in
// order, for one of those to finish its lane). An idle lane holds no buffer and
// no goroutine, and after laneIdle it is released.
type lane struct {
	queue     []OutboxID // oldest first; nil while idle
	running   bool       // a goroutine is delivering the queue
	waiting   bool       // in lanes.ready, for a goroutine of its account
	idleSince time.Time  // engine clock, set when the queue drained
	// until is when this process's lease on the lane lapses, as last stored
	// (shared only, core/lanelease.go); zero when it holds none.
	until time.Time
}

// lanes delivers the outbox: one ordered lane per (account, conversation), each
// with a bounded queue and at most one goroutine, and at most laneWorkers such
// goroutines per account, owned by the dispatcher's context.
type lanes struct {
	e        *Engine
	mu       sync.Mutex
	m        map[laneKey]*lane
	inflight map[OutboxID]bool
	wg       sync.WaitGroup
	idle     time.Duration         // release a lane idle this long; laneIdle
	released time.Time             // when idle lanes were last looked for (engine clock)
	drop     []laneKey             // shared: released lanes whose leases are still to drop
	theirs   map[laneKey]time.Time // shared: lanes other processes hold, until when
	// mPeak and inflightPeak are the most entries m and inflight held since
	// they were made: a Go map keeps its buckets after deletes, so release
	// rebuilds a map that shrank to a quarter of that (shrink).
	mPeak, inflightPeak int
	busy                map[AccountID]int     // lane goroutines per account, at most laneWorkers
	ready               map[AccountID][]*lane // lanes waiting for one of them, oldest first
}

func newLanes(e *Engine) *lanes {
	return &lanes{e: e, m: map[laneKey]*lane{}, inflight: map[OutboxID]bool{}, idle: laneIdle,
		busy: map[AccountID]int{}, ready: map[AccountID][]*lane{}}
}

// kickOutbox wakes the dispatcher after new outbox entries were committed,
// and, shared, the other processes' dispatchers (the entry's lane may be theirs).
func (e *Engine) kickOutbox() {
	e.kickLocal()
	e.cluster.hint("outbox", "")
}

// kickLocal wakes this process's dispatcher.
func (e *Engine) kickLocal() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// dispatch hands pending entries to their lanes until ctx is done.
func (l *lanes) dispatch(ctx context.Context) {
	t := time.NewTicker(dispatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.e.kick:
		case <-t.C:
		}
		l.release(l.e.clock.Now())
		l.dropReleased(ctx)
		if err := l.sweep(ctx); err != nil && ctx.Err() == nil {
			l.e.log.Error("outbox sweep", "err", err)
		}
	}
}

// release forgets the lanes idle for l.idle or longer; it looks at most once per
// dispatchInterval of the engine clock, so a burst of kicks does not rescan.
func (l *lanes) release(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.released) < dispatchInterval {
		return
	}
	l.released = now
	l.mPeak = max(l.mPeak, len(l.m)) // only release deletes lanes: this is the most since the last look
	for k, ln := range l.m {
		if !ln.running && len(ln.queue) == 0 && now.Sub(ln.idleSince) >= l.idle {
			delete(l.m, k)
			if ln.leased() {
				l.drop = append(l.drop, k)
			}
		}
	}
	l.m = shrink(l.m, &l.mPeak)
	l.inflight = shrink(l.inflight, &l.inflightPeak)
}

// shrink returns m, or, when m held at least shrinkFrom entries (*peak) and now
// holds a quarter of that or less, a copy of m sized for what it holds, and then
// sets *peak to that. Go maps never give back the buckets a burst grew them to,
// so without this the lanes of 5,000 conversations would stay allocated after
// they were released (memory flat under bursts, DESIGN.md §9).
func shrink[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if *peak < shrinkFrom || len(m) > *peak/4 {
		return m
	}
	n := make(map[K]V, len(m))
	for k, v := range m {
		n[k] = v
	}
	*peak = len(n)
	return n
}

func (l *lanes) sweep(ctx context.Context) error {
	var after OutboxID
	full := map[laneKey]bool{}
	for {
		var page []OutboxEntry
		err := l.e.store.View(ctx, func(tx ReadTx) error {
			var err error
			page, err = tx.PendingOutbox(after, dispatchPage)
			return err
		})
		if err != nil {
			return err
		}
		mine := l.leaseLanes(ctx, page)
		for _, o := range page {
			after = o.ID
			k := laneKey{o.Account, o.Conversation}
			if full[k] || !mine(k) {
				continue
			}
			if _, ok := l.e.adapter(o.Account); !ok {
				l.settle(ctx, o, "", fmt.Errorf("no adapter is running for account %q", o.Account), true)
				continue
			}
			if !l.offer(ctx, k, o.ID) {
				full[k] = true
			}
		}
		if len(page) < dispatchPage {
			return nil
		}
	}
}

// offer queues entry id on its lane, making the lane and starting its goroutine
// when needed (or, with laneWorkers of its account busy, queueing the lane for
// the first of them that is done), unless the entry is already in flight; false
// if the lane is full.
func (l *lanes) offer(ctx context.Context, k laneKey, id OutboxID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[id] {
		return true
	}
	ln, ok := l.m[k]
	if !ok {
		ln = &lane{}
		l.m[k] = ln
	}
	if l.e.cluster.shared && !ln.leased() {
		return true // not this process's lane (lease lost or not taken): the sweep sees to it
	}
	if len(ln.queue) >= laneQueue {
		return false
	}
	ln.queue = append(ln.queue, id)
	l.inflight[id] = true
	l.inflightPeak = max(l.inflightPeak, len(l.inflight))
	if ln.running || ln.waiting {
		return true
	}
	if l.busy[k.account] >= laneWorkers {
		ln.waiting = true
		l.ready[k.account] = append(l.ready[k.account], ln)
		return true
	}
	ln.running = true
	l.busy[k.account]++
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.run(ctx, k.account, ln)
	}()
	return true
}

// run delivers ln's queue in order; when it is empty (dropping the buffer) it
// goes on with the account's oldest waiting lane, and returns when none waits.
// While lanes wait, it delivers one entry of a lane and puts the lane back at
// the end of the wait (the lane's order is kept: one goroutine at a time has it).
// When ctx is done it empties every lane it takes (the entries stay pending in
// the store).
func (l *lanes) run(ctx context.Context, account AccountID, ln *lane) {
	for {
		l.mu.Lock()
		if len(ln.queue) == 0 || ctx.Err() != nil {
			for _, id := range ln.queue {
				delete(l.inflight, id)
			}
			ln.queue, ln.running, ln.idleSince = nil, false, l.e.clock.Now()
			ln = l.next(account)
			l.mu.Unlock()
			if ln == nil {
				return
			}
			continue
		}
		id := ln.queue[0]
		ln.queue = ln.queue[1:]
		l.mu.Unlock()
		l.deliver(ctx, ln, id)
		l.mu.Lock()
		delete(l.inflight, id)
		if len(ln.queue) > 0 && len(l.ready[account]) > 0 {
			// Lanes wait: take turns, one entry each, so a busy conversation
			// does not hold one of the account's goroutines while others wait.
			ln.running, ln.waiting = false, true
			l.ready[account] = append(l.ready[account], ln)
			ln = l.next(account)
		}
		l.mu.Unlock()
	}
}

// next hands a goroutine of account that finished its lane the account's
// oldest waiting lane, or, when none waits, counts the goroutine out and
// returns nil. l.mu is held.
func (l *lanes) next(account AccountID) *lane {
	if q := l.ready[account]; len(q) > 0 {
		ln := q[0]
		q[0] = nil
		if q = q[1:]; len(q) == 0 {
			delete(l.ready, account) // the emptied array goes with it
		} else {
			l.ready[account] = q
		}
		ln.waiting, ln.running = false, true
		return ln
	}
	if l.busy[account]--; l.busy[account] <= 0 {
		delete(l.busy, account)
	}
	return nil
}

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
		l.e.observeDelivery(o.Account, "retry")
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
				q, err := tx.Question(cur.Question)
				if err != nil {
					return err
				}
				for j, p := range q.Posts {
					if p.Account == o.Account && p.Conversation == o.Conversation {
						q.Posts[j].Account = alt
					}
				}
				if _, err := tx.PutQuestion(q); err != nil {
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
		l.e.kickOutbox()
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
				if err := recordPost(tx, cur, pid); err != nil {
					return err
				}
			}
			// Remember the delivered message's platform identity, so a reply to it
			// joins this thread (Inbound.ReplyToKey).
			if err := l.rememberPlatformID(tx, cur, pid); err != nil {
				return err
			}
		}
		cur.Attempts++
		_, err = tx.PutOutbox(cur)
		return err
	})
	if err != nil && ctx.Err() == nil {
		l.e.log.Error("outbox settle", "outbox", o.ID, "err", err)
	}
	l.e.observeDelivery(o.Account, settleOutcome(failed))
	if failed {
		l.e.log.Error("delivery failed for good", "account", o.Account, "outbox", o.ID, "err", Redact(derr.Error()))
	}
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

// waitIdle waits up to d until nothing is in flight and nothing is pending.
func (l *lanes) waitIdle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		n := len(l.inflight)
		l.mu.Unlock()
		if n == 0 {
			var pending []OutboxEntry
			_ = l.e.store.View(context.Background(), func(tx ReadTx) error {
				var err error
				pending, err = tx.PendingOutbox(0, dispatchPage)
				return err
			})
			if !l.anyMine(pending) {
				return true
			}
			l.e.kickOutbox()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// wait blocks until every lane goroutine has returned (after ctx is done).
func (l *lanes) wait() { l.wg.Wait() }

// recordPost stores where a question was shown, so its decision can replace it.
func recordPost(tx Tx, o OutboxEntry, pid string) error {
	q, err := tx.Question(o.Question)
	if err != nil {
		return err
	}
	for i, p := range q.Posts {
		if p.Account == o.Account && p.Conversation == o.Conversation {
			q.Posts[i].PlatformID = pid
		}
	}
	_, err = tx.PutQuestion(q)
	return err
}
