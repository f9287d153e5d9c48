package core

import "strings"

// Quiet threads (cost control): where people talk among themselves, a bot is
// not woken by every message.
//
// An unaddressed human message (no bot mentioned, no person mentioned, not an
// answer to a question, not a platform reply to a bot's message) in a thread that has more than one human participant,
// the sender included, wakes no bot, unless the account it came through says
// reply_to_unaddressed: always or the channel it came from is open (ModeOpen).
// With one human the seed's rule holds: the thread's only bot, else its default bot, answers. That covers direct messages
// (one person), a 1:1 with a bot inside a channel (exactly one human and one
// bot) and a person talking to the team.

// quiet reports whether the unaddressed human message m in thread t wakes no
// bot under the quiet threads rule. t's participants do not yet include m's
// sender when it is new to the thread.
func (s *settings) quiet(t *Thread, m Message) bool {
	if m.Origin != nil && s.alwaysReply[m.Origin.Account] {
		return false
	}
	humans := 0
	sender := false
	for _, p := range t.Participants {
		if isHuman(p) {
			humans++
			sender = sender || p == m.Sender
		}
	}
	if !sender {
		humans++
	}
	return humans > 1
}

// isHuman reports whether an actor id is a person: not a bot, not the system,
// not a schedule, not a trigger (an inbound webhook).
func isHuman(id ActorID) bool {
	s := string(id)
	return s != "" && !strings.HasPrefix(s, "bot:") && !strings.HasPrefix(s, "schedule:") && !strings.HasPrefix(s, "trigger:")
}

// repliesToBotTx reports whether the platform message key replied to (Inbound.
// ReplyToKey) is a stored message of a bot: such a reply addresses the bots of
// the thread even when it names none. Lookup failures count as no.
func repliesToBotTx(tx ReadTx, key string) bool {
	if key == "" {
		return false
	}
	mid, err := tx.Seen(key)
	if err != nil {
		return false
	}
	m, err := tx.Message(mid)
	return err == nil && strings.HasPrefix(string(m.Sender), "bot:")
}
