package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Ingest stores one inbound human message and routes it, in one transaction
// (DESIGN.md §4): dedup key, actor upsert, thread and binding lookup or creation,
// message insert, participants, hop reset, inbox items and outbox entries. The
// adapter acknowledges the platform only after Ingest returns nil, so an
// acknowledged message is never lost. Concurrent calls share commits (Store.Batch).
//
// A message whose DedupKey was seen before changes nothing except that bots this
// delivery mentions and that were not woken by the first one are woken now (two
// accounts in one group each see their own bot's mention). Ingest returns
// ErrStopped during shutdown and a descriptive error for an invalid Inbound.
func (e *Engine) Ingest(ctx context.Context, in Inbound) (IngestResult, error) {
	return e.router.ingest(ctx, in)
}

// ingest is Engine.Ingest.
func (rt *router) ingest(ctx context.Context, in Inbound) (IngestResult, error) {
	if err := validateInbound(in); err != nil {
		return IngestResult{}, err
	}
	if rt.e.isStopping() {
		return IngestResult{}, ErrStopped
	}
	start := time.Now()
	var res IngestResult
	err := rt.e.store.Batch(ctx, func(tx Tx) error {
		var err error
		res, err = rt.ingestTx(tx, in) // Batch may run fn again: the last run's result is the one committed
		return err
	})
	if err != nil {
		return IngestResult{}, err
	}
	observeIngest(rt.e.Observe(), in.Platform, start, res)
	if len(in.Attachments) > 0 && !res.Duplicate && !res.Dropped {
		rt.e.files.enqueue(res.Message) // after the durable ingest; never blocks
	}
	// Every woken bot's worker is woken right after the commit; its pick starts
	// the run (core/scheduler.go), in the next commit the writer makes.
	rt.e.nudge(res.Woken)
	return res, nil
}

func validateInbound(in Inbound) error {
	var missing []string
	if in.Account == "" {
		missing = append(missing, "Account")
	}
	if in.Platform == "" {
		missing = append(missing, "Platform")
	}
	if in.DedupKey == "" {
		missing = append(missing, "DedupKey")
	}
	if in.ThreadKey == "" && in.Thread == 0 {
		missing = append(missing, "ThreadKey")
	}
	if in.SenderID == "" {
		missing = append(missing, "SenderID")
	}
	if strings.HasPrefix(string(in.SenderID), "bot:") {
		return fmt.Errorf("core: inbound sender %q is a bot id", in.SenderID)
	}
	if len(missing) > 0 {
		return fmt.Errorf("core: inbound message lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

func (rt *router) ingestTx(tx Tx, in Inbound) (IngestResult, error) {
	if mid, err := tx.Seen(in.DedupKey); err == nil {
		return rt.duplicateTx(tx, in, mid)
	} else if !errors.Is(err, ErrNotFound) {
		return IngestResult{}, err
	}

	t, found, viaReply, err := rt.resolveThreadTx(tx, in)
	if err != nil {
		return IngestResult{}, err
	}
	if !found && !in.StartThread && !in.NewThread {
		return IngestResult{Dropped: true}, nil
	}
	now := rt.e.clock.Now()
	if !found {
		t = Thread{Key: in.ThreadKey, Created: now}
		def := in.DefaultBot
		if in.Account != "" {
			d, err := loadPolicyTx(tx)
			if err != nil {
				return IngestResult{}, err
			}
			def = cmp.Or(rt.e.policyIn(&d, in.Account, rt.e.channelOf(in.Account, in.Conversation)).DefaultBot, def)
		}
		if def != "" && rt.e.cfg().knownBot(def) {
			t.DefaultBot = BotActorID(def)
		}
		t.Title = firstLine(in.Text, 80)
		if t, err = tx.PutThread(t); err != nil {
			return IngestResult{}, err
		}
	}
	if in.ThreadKey != "" && !viaReply && (!found || in.Thread != 0 || t.Key != in.ThreadKey) { // a reply into an older thread leaves the current one
		if err := tx.BindThreadKey(in.ThreadKey, t.ID); err != nil {
			return IngestResult{}, err
		}
	}
	if !found || !in.Announce {
		// An announced event joins its thread wherever the thread is bound now
		// (a platform thread its first message opened), adding nothing.
		t.Bindings, _ = addBinding(t.Bindings, in.Platform, in.Conversation, in.Account)
	}

	// Actor upsert: created on first sight, name kept current.
	a, err := tx.Actor(in.SenderID)
	switch {
	case errors.Is(err, ErrNotFound):
		a = Actor{ID: in.SenderID, Kind: ActorHuman, Name: in.SenderName, Created: now}
		if err := tx.PutActor(a); err != nil {
			return IngestResult{}, err
		}
	case err != nil:
		return IngestResult{}, err
	case in.SenderName != "" && a.Name != in.SenderName:
		a.Name = in.SenderName
		if err := tx.PutActor(a); err != nil {
			return IngestResult{}, err
		}
	}
	name := a.Name
	if name == "" {
		name = string(in.SenderID)
	}

	// A reply that answers a pending ask_human resumes that bot's run instead of
	// waking it with a message item.
	answered, err := rt.e.questions.answerByReplyTx(tx, &t, in, name)
	if err != nil {
		return IngestResult{}, err
	}
	origin := &Origin{Account: in.Account, Conversation: in.Conversation, PlatformID: in.PlatformID}
	if in.Announce {
		origin = nil // posted into its conversation, not taken from it
	}
	p, err := rt.postTx(tx, &t, postSpec{
		msg: Message{
			Sender: in.SenderID, SenderName: name, Text: in.Text, Created: now,
			Origin: origin, Attachments: inboundAttachments(in.Attachments),
		},
		wakeNobody:     in.WakeNobody,
		opens:          in.Announce && !found,
		native:         in.Mentions,
		mentionsHumans: in.MentionsHumans,
		answered:       answered,
		repliesToBot:   repliesToBotTx(tx, in.ReplyToKey),
	})
	if err != nil {
		return IngestResult{}, err
	}
	if answered != "" {
		p.woken = append(p.woken, answered)
	}
	if err := tx.MarkSeen(in.DedupKey, p.msg.ID); err != nil {
		return IngestResult{}, err
	}
	rt.e.activity(tx, Activity{Event: "message.ingested", Summary: fmt.Sprintf("%s in %s woke %v", name, in.Platform, p.woken), Thread: t.ID, Actor: in.SenderID, Message: p.msg.ID})
	return IngestResult{Thread: t.ID, Message: p.msg.ID, Woken: p.woken}, nil
}

// ThreadByKey returns the thread a platform thread key is bound to now (the one
// a message with that ThreadKey would join), or 0 when none is. A terminal uses
// it to know its current thread after a restart. Errors are store failures.
func (e *Engine) ThreadByKey(ctx context.Context, key string) (ThreadID, error) {
	var id ThreadID
	err := e.store.View(ctx, func(tx ReadTx) error {
		var err error
		id, err = tx.ThreadByKey(key)
		if errors.Is(err, ErrNotFound) {
			id, err = 0, nil
		}
		return err
	})
	return id, err
}

// resolveThreadTx finds the thread an inbound message belongs to: an explicit
// Thread, else the thread of the message it replies to, else ThreadKey's.
func (rt *router) resolveThreadTx(tx Tx, in Inbound) (t Thread, found, viaReply bool, err error) {
	if in.Thread != 0 {
		t, err := tx.Thread(in.Thread)
		if errors.Is(err, ErrNotFound) {
			return Thread{}, false, false, fmt.Errorf("core: thread %d: %w", in.Thread, errNoThread)
		}
		return t, err == nil, false, err
	}
	if in.NewThread {
		return Thread{}, false, false, nil
	}
	if in.ReplyToKey != "" {
		if mid, err := tx.Seen(in.ReplyToKey); err == nil {
			m, err := tx.Message(mid)
			switch {
			case err == nil:
				t, err := tx.Thread(m.Thread)
				return t, err == nil, err == nil, err
			case !errors.Is(err, ErrNotFound):
				return Thread{}, false, false, err
			}
			// The replied-to message was pruned (retention): use the thread key.
		} else if !errors.Is(err, ErrNotFound) {
			return Thread{}, false, false, err
		}
	}
	id, err := tx.ThreadByKey(in.ThreadKey)
	if errors.Is(err, ErrNotFound) {
		return Thread{}, false, false, nil
	} else if err != nil {
		return Thread{}, false, false, err
	}
	t, err = tx.Thread(id)
	if err != nil {
		return Thread{}, false, false, err
	}
	return t, true, false, nil
}

// duplicateTx handles a redelivered message: record the account's presence and
// wake bots this delivery mentions that the first one did not.
func (rt *router) duplicateTx(tx Tx, in Inbound, mid MessageID) (IngestResult, error) {
	m, err := tx.Message(mid)
	if errors.Is(err, ErrNotFound) {
		// A redelivery of a message that retention has pruned since: still a duplicate.
		return IngestResult{Message: mid, Duplicate: true}, nil
	}
	if err != nil {
		return IngestResult{}, err
	}
	t, err := tx.Thread(m.Thread)
	if err != nil {
		return IngestResult{}, err
	}
	res := IngestResult{Thread: t.ID, Message: mid, Duplicate: true}
	var changed bool
	if !in.Announce { // an announced event came from no conversation
		t.Bindings, changed = addBinding(t.Bindings, in.Platform, in.Conversation, in.Account)
	}
	var extra []string
	for _, h := range in.Mentions {
		h = strings.ToLower(h)
		if h == "*" {
			// The app mention of a whole-team account is transport (DESIGN.md §3
			// Mentions): either the message names bots, which the first delivery
			// woke, or it names none and the first delivery already gave it to the
			// default bot (or, as an answer, to nobody). Waking the default bot
			// here would run it twice or next to the bots the message is for.
			continue
		}
		if rt.e.cfg().knownBot(h) && !slices.Contains(m.Mentions, h) && !slices.Contains(extra, h) {
			extra = append(extra, h)
		}
	}
	for _, h := range extra {
		if _, err := rt.enqueueTx(tx, BotActorID(h), t.ID, mid); err != nil {
			return IngestResult{}, err
		}
		if id := BotActorID(h); !t.HasParticipant(id) {
			t.Participants = append(t.Participants, id)
		}
		m.Mentions = append(m.Mentions, h)
		res.Woken = append(res.Woken, h)
		changed = true
	}
	if len(extra) > 0 {
		// The stored mentions are the union of what every account saw, so scoped
		// views of the newly woken bots include the message.
		if _, err := tx.PutMessage(m); err != nil {
			return IngestResult{}, err
		}
	}
	if changed {
		if _, err := tx.PutThread(t); err != nil {
			return IngestResult{}, err
		}
	}
	return res, nil
}

// addBinding records that account is present in (platform, conversation) and
// reports whether that changed anything.
func addBinding(bs []Binding, platform string, conv ConversationRef, account AccountID) ([]Binding, bool) {
	for i := range bs {
		if bs[i].Platform == platform && bs[i].Conversation == conv {
			if slices.Contains(bs[i].Accounts, account) {
				return bs, false
			}
			bs[i].Accounts = append(bs[i].Accounts, account)
			return bs, true
		}
	}
	return append(bs, Binding{Platform: platform, Conversation: conv, Accounts: []AccountID{account}}), true
}

// firstLine returns the first line of s, cut to at most n runes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
