package core

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// mentionRE finds @handle tokens not preceded by a word character (so an e-mail
// address is not a mention).
var mentionRE = regexp.MustCompile(`(?:^|[^\w@])@([A-Za-z0-9_]+)`)

// ParseMentions returns the configured bot handles mentioned as @handle in text, in
// order of first appearance, lowercased and deduplicated. "@engineering" does not
// mention "engineer". known reports whether a handle is a configured bot.
func ParseMentions(text string, known func(string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mentionRE.FindAllStringSubmatch(text, -1) {
		h := strings.ToLower(m[1])
		if seen[h] || !known(h) {
			continue
		}
		seen[h] = true
		out = append(out, h)
	}
	return out
}

// appMentionIsTransport drops the native "*" from native when the message names a
// bot itself. A native "*" is a mention of a whole-team account's own platform user
// (the Slack app, the Telegram or Feishu bot): the app is how the message reaches
// openbot, not whom it is for. It stands for the thread's default bot only when it
// is the message's sole bot mention (DESIGN.md §3 Mentions), so "@app @engineer fix
// X" wakes the engineer alone while "@app fix X" wakes the default bot.
func appMentionIsTransport(native []string, text string, known func(string) bool) []string {
	if !slices.Contains(native, "*") {
		return native
	}
	named := len(ParseMentions(text, known)) > 0
	for _, h := range native {
		named = named || (h != "*" && known(strings.ToLower(h)))
	}
	if !named {
		return native
	}
	return slices.DeleteFunc(slices.Clone(native), func(h string) bool { return h == "*" })
}

// knownBot reports whether h is the handle of a configured bot.
func (s *settings) knownBot(h string) bool { _, ok := s.bots[h]; return ok }

// threadDefault is the thread's default bot handle (seed §6: thread setting, else global).
func (s *settings) threadDefault(t *Thread) string {
	if t.DefaultBot != "" {
		h := strings.TrimPrefix(string(t.DefaultBot), "bot:")
		if s.knownBot(h) {
			return h
		}
	}
	return s.defaultBot
}

// botsIn returns the handles of the bots taking part in t, in participant order.
func (s *settings) botsIn(t *Thread) []string {
	var out []string
	for _, p := range t.Participants {
		if h, ok := strings.CutPrefix(string(p), "bot:"); ok && s.knownBot(h) {
			out = append(out, h)
		}
	}
	return out
}

// router is the engine's part for ingest and routing (seed §4, DESIGN.md §4):
// it stores inbound messages (dedup key, thread and binding, actor; core/ingest.go)
// and posts every message, a person's, a bot's or the system's, into its thread
// with the seed's routing: mentions and targets, held hand-offs, the hop brake,
// inbox items and one outbox entry per binding. Its state is the store's.
type router struct {
	e *Engine
}

// postSpec is a message about to be posted plus what routing needs to know.
type postSpec struct {
	msg Message
	// native are handles resolved by an adapter from platform mentions ("*" = the
	// thread's default bot); merged with the @handles parsed from the text.
	native []string
	// mentionsHumans: a human message that mentions only people wakes no bot.
	mentionsHumans bool
	// replyTo maps a conversation to the platform id of the message this answers.
	replyTo map[ConversationRef]string
	// repliesToBot: a human message that is a platform reply to a bot's
	// message addresses the bots as a mention-free message did before quiet
	// threads (core/quiet.go).
	repliesToBot bool
	// answered is the bot whose question this human message answered; it gets a
	// resume item, not a message item.
	answered string
	// streamed maps (account, conversation) to the messages a bot's reply was
	// streamed into; outboxTx moves each onto its entry and deletes the key, so
	// what is left was not taken by any entry (core/stream.go).
	streamed map[laneKey][]string
	// wakeNobody: the message is stored and delivered but wakes no bot.
	wakeNobody bool
	// opens: the message starts its thread from outside its conversation
	// (Inbound.Announce); its entries open a platform thread when delivered.
	opens bool
}

// systemNotice is a notice from the system in the thread (it wakes nobody,
// seed invariant 9), about run when run is not 0.
func systemNotice(run RunID, text string) Message {
	return Message{Sender: SystemActor, SenderName: "system", Kind: KindNotice, Run: run, Text: text}
}

// posted is what postTx did.
type posted struct {
	msg   Message
	woken []string // bot handles that got an inbox item
}

// postTx inserts a message into thread t and applies the seed's routing (§4.1 to
// §4.3) inside tx: participants, hop limit, inbox items, held hand-offs and one
// outbox entry per binding. t is updated in place and stored.
func (rt *router) postTx(tx Tx, t *Thread, spec postSpec) (posted, error) {
	set := rt.e.cfg()
	m := spec.msg
	m.Thread = t.ID
	if m.Created.IsZero() {
		m.Created = rt.e.clock.Now()
	}
	isBot := strings.HasPrefix(string(m.Sender), "bot:")
	isSystem := m.Sender == SystemActor
	senderHandle := strings.TrimPrefix(string(m.Sender), "bot:")

	// Mentions: native (adapter-resolved) first, then text @handles.
	var mentions []string
	seen := map[string]bool{}
	add := func(h string) {
		if h == "*" {
			h = set.threadDefault(t)
		}
		if !seen[h] && set.knownBot(h) {
			seen[h] = true
			mentions = append(mentions, h)
		}
	}
	for _, h := range appMentionIsTransport(spec.native, m.Text, set.knownBot) {
		add(strings.ToLower(h))
	}
	for _, h := range ParseMentions(m.Text, set.knownBot) {
		add(h)
	}
	m.Mentions = mentions

	// Targets (seed §4.1).
	var targets []string
	hopLimited := false
	switch {
	case isSystem || spec.wakeNobody:
		// A message from the system wakes nobody; nor one told to.
	case isBot:
		for _, h := range mentions {
			if h != senderHandle {
				targets = []string{h} // a bot hands off to its first mention only
				break
			}
		}
		if len(targets) > 0 && m.Hop >= set.limits.MaxBotHops {
			targets, hopLimited = nil, true
		}
	default: // human
		for _, h := range mentions {
			if h != senderHandle {
				targets = append(targets, h)
			}
		}
		if len(mentions) == 0 && !spec.mentionsHumans && spec.answered == "" && (spec.repliesToBot || !set.quiet(t, m) || rt.e.openOriginTx(tx, m.Origin)) {
			if bots := set.botsIn(t); len(bots) == 1 {
				targets = bots
			} else {
				targets = []string{set.threadDefault(t)}
			}
		}
		if spec.answered != "" {
			targets = slices.DeleteFunc(targets, func(h string) bool { return h == spec.answered })
		}
	}

	// Held hand-off: the sender still has mail queued in this thread.
	held := false
	if isBot && len(targets) > 0 {
		q, err := tx.QueuedInThread(m.Sender, t.ID)
		if err != nil {
			return posted{}, err
		}
		for _, it := range q {
			if it.Kind == ItemMessage {
				held = true
				break
			}
		}
	}

	m, err := tx.PutMessage(m)
	if err != nil {
		return posted{}, err
	}

	// Participants: the sender and every mentioned bot join the thread.
	if !isSystem && !t.HasParticipant(m.Sender) {
		t.Participants = append(t.Participants, m.Sender)
	}
	for _, h := range mentions {
		if id := BotActorID(h); !t.HasParticipant(id) {
			t.Participants = append(t.Participants, id)
		}
	}

	var out posted
	out.msg = m
	if held {
		for _, h := range targets {
			t.Held = upsertHold(t.Held, HeldHandoff{From: m.Sender, Target: BotActorID(h), Message: m.ID})
		}
		rt.e.activity(tx, Activity{Event: "message.handoff_held", Summary: fmt.Sprintf("@%s's hand-off to @%s held until its queued mail is handled", senderHandle, strings.Join(targets, ", @")), Thread: t.ID, Actor: m.Sender, Message: m.ID})
		targets = nil
	}
	for _, h := range targets {
		if _, err := rt.enqueueTx(tx, BotActorID(h), t.ID, m.ID); err != nil {
			return posted{}, err
		}
		// A real hand-off supersedes an earlier hold from the same sender.
		t.Held = dropHold(t.Held, m.Sender, BotActorID(h))
		out.woken = append(out.woken, h)
	}
	if !isBot && !isSystem {
		t.HopLimitNotified = false // any human message resets the brake
	}

	if err := rt.outboxTx(tx, t, m, spec); err != nil {
		return posted{}, err
	}
	if _, err := tx.PutThread(*t); err != nil {
		return posted{}, err
	}

	if held {
		notice := Message{
			Sender: SystemActor, SenderName: "system", Kind: KindHandoffHeld,
			Text: fmt.Sprintf("@%s's hand-off to @%s is held until @%s has handled its queued messages in this thread.",
				senderHandle, strings.Join(heldTargets(t.Held, m.Sender), ", @"), senderHandle),
		}
		if _, err := rt.postTx(tx, t, postSpec{msg: notice}); err != nil {
			return posted{}, err
		}
	}
	if hopLimited && !t.HopLimitNotified {
		t.HopLimitNotified = true
		notice := Message{
			Sender: SystemActor, SenderName: "system", Kind: KindHopLimit,
			Text: fmt.Sprintf("Stopped the bot-to-bot hand-offs: this thread reached the limit of %d hops since the last human message. Reply to continue.", set.limits.MaxBotHops),
		}
		rt.e.activity(tx, Activity{Event: "thread.hop_limit", Level: "warn", Summary: notice.Text, Thread: t.ID, Message: m.ID})
		if _, err := rt.postTx(tx, t, postSpec{msg: notice}); err != nil {
			return posted{}, err
		}
	}
	return out, nil
}

// enqueueTx puts a message item into a bot's mailbox.
func (rt *router) enqueueTx(tx Tx, actor ActorID, thread ThreadID, msg MessageID) (InboxItem, error) {
	return tx.PutItem(InboxItem{Actor: actor, Thread: thread, Kind: ItemMessage, Message: msg, Status: ItemQueued, Created: rt.e.clock.Now()})
}

func upsertHold(hs []HeldHandoff, h HeldHandoff) []HeldHandoff {
	hs = dropHold(hs, h.From, h.Target)
	return append(hs, h)
}

func dropHold(hs []HeldHandoff, from, target ActorID) []HeldHandoff {
	out := hs[:0:0]
	for _, h := range hs {
		if h.From != from || h.Target != target {
			out = append(out, h)
		}
	}
	return out
}

func heldTargets(hs []HeldHandoff, from ActorID) []string {
	var out []string
	for _, h := range hs {
		if h.From == from {
			out = append(out, strings.TrimPrefix(string(h.Target), "bot:"))
		}
	}
	return out
}

// releaseHoldsTx delivers bot's held hand-offs in thread once its queue there is
// empty (seed §4.1, invariant 8). It reports the handles woken.
func (rt *router) releaseHoldsTx(tx Tx, bot ActorID, threadID ThreadID) ([]string, error) {
	t, err := tx.Thread(threadID)
	if err != nil {
		return nil, err
	}
	var mine []HeldHandoff
	for _, h := range t.Held {
		if h.From == bot {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	q, err := tx.QueuedInThread(bot, threadID)
	if err != nil {
		return nil, err
	}
	for _, it := range q {
		if it.Kind == ItemMessage {
			return nil, nil // still has mail: keep holding
		}
	}
	var woken []string
	for _, h := range mine {
		if _, err := rt.enqueueTx(tx, h.Target, threadID, h.Message); err != nil {
			return nil, err
		}
		t.Held = dropHold(t.Held, h.From, h.Target)
		handle := strings.TrimPrefix(string(h.Target), "bot:")
		woken = append(woken, handle)
		rt.e.activity(tx, Activity{Event: "inbox.hold_released", Summary: fmt.Sprintf("held hand-off from %s delivered to @%s", bot, handle), Thread: threadID, Actor: h.Target, Message: h.Message})
	}
	if _, err := tx.PutThread(t); err != nil {
		return nil, err
	}
	return woken, nil
}

// outboxTx creates one outbox entry per binding of t for message m. A human's
// message is not echoed to the conversation it came from (DESIGN.md §4). An entry
// whose account and conversation streamed the reply gets those messages to edit.
func (rt *router) outboxTx(tx Tx, t *Thread, m Message, spec postSpec) error {
	replyTo := spec.replyTo
	for _, b := range t.Bindings {
		if m.Origin != nil && m.Origin.Conversation == b.Conversation {
			continue
		}
		acct, ok := rt.pickAccount(b, m.Sender)
		if !ok {
			continue
		}
		k := laneKey{acct, b.Conversation}
		streamed := spec.streamed[k]
		delete(spec.streamed, k)
		_, err := tx.PutOutbox(OutboxEntry{
			Account: acct, Conversation: b.Conversation, Thread: t.ID, Message: m.ID,
			ReplyTo: replyTo[b.Conversation], Status: OutboxPending, Created: rt.e.clock.Now(),
			Streamed: streamed, Op: messageOp(m), Opens: spec.opens,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// pickAccount chooses the account that posts sender's message to binding b
// (DESIGN.md §3): the bot's own account when it is known to be in the
// conversation, else the account the binding came in through.
func (rt *router) pickAccount(b Binding, sender ActorID) (AccountID, bool) {
	if len(b.Accounts) == 0 {
		return "", false
	}
	if h, ok := strings.CutPrefix(string(sender), "bot:"); ok {
		for _, a := range b.Accounts {
			if ad, ok := rt.e.adapter(a); ok && ad.Bot() == h {
				return a, true
			}
		}
	}
	for _, a := range b.Accounts {
		if _, ok := rt.e.adapter(a); ok {
			return a, true
		}
	}
	return b.Accounts[0], true
}

// errNoThread is returned when an Inbound names a thread that does not exist.
var errNoThread = errors.New("thread does not exist")
