package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Who may answer a question (DESIGN.md §5). An approval is answered only by the
// approvers configured for its tool, else the bot's, else the global approvers,
// else the person who asked for the work; it fails closed. A free-text question
// of ask_human may be answered by the people of the thread unless approvers are
// configured, and only by a message meant for it.

// maxAskerRuns bounds how many runs askersTx follows back through a hand-off
// chain; a chain is at most Limits.MaxBotHops long, so this is never reached in
// practice, but a corrupt store must not make it loop.
const maxAskerRuns = 256

// toolSourceSeparator separates an MCP server's name from its tool's name
// ("<server>__<tool>"), as agents.SourceSeparator does.
const toolSourceSeparator = "__"

// ToolMatches reports whether an approval_tools entry covers a tool name: the
// exact name, a source name "<server>" (every "<server>__<tool>"), or the pattern
// "<server>__*" (DESIGN.md §5, §6).
func ToolMatches(pattern, name string) bool {
	switch {
	case pattern == name:
		return true
	case strings.HasSuffix(pattern, toolSourceSeparator+"*"):
		return strings.HasPrefix(name, strings.TrimSuffix(pattern, "*"))
	case !strings.Contains(pattern, toolSourceSeparator):
		return strings.HasPrefix(name, pattern+toolSourceSeparator)
	}
	return false
}

// approversFor returns the configured approvers of q, most specific first: the
// tool's (approvals only), the channel's (channel, from the thread's channel
// policy), the bot's, the global ones; nil when none is configured.
func (qs *questions) approversFor(q Question, channel []ActorID) []ActorID {
	b, ok := qs.e.bot(strings.TrimPrefix(string(q.Bot), "bot:"))
	if ok && q.Kind == QuestionApproval && q.Tool != "" {
		for _, ta := range b.ToolApprovers {
			if len(ta.Approvers) > 0 && ToolMatches(ta.Tool, q.Tool) {
				return ta.Approvers
			}
		}
	}
	if len(channel) > 0 {
		return channel
	}
	if ok && len(b.Approvers) > 0 {
		return b.Approvers
	}
	if a := qs.e.cfg().approvers; len(a) > 0 {
		return a
	}
	return nil
}

// authorizedTx reports whether actor may answer q. An owner always may. An
// approval needs a configured approver (approversFor) who is not one of the
// people who asked for the work (Question.Askers), unless self_approve is on
// (for the bot or globally); with none configured, only an asker under
// self_approve. An ask_human question takes its configured approvers, else a
// human of the thread. A person's linked identities count as theirs. An empty
// or bot actor fails closed.
func (qs *questions) authorizedTx(tx ReadTx, q Question, actor ActorID) (bool, error) {
	if !human(actor) {
		return false, nil
	}
	d, err := loadPeopleTx(tx)
	if err != nil {
		return false, err
	}
	if qs.e.ownerIn(&d, actor) {
		return true, nil
	}
	ids := d.identities(actor)
	pol, err := qs.e.threadPolicyByIDTx(tx, q.Thread)
	if err != nil {
		return false, err
	}
	approvers := qs.approversFor(q, pol.Approvers)
	if q.Kind == QuestionApproval {
		if anyIn(ids, q.Askers) && !qs.selfApprove(q.Bot) {
			return false, nil
		}
		if approvers != nil {
			return anyIn(ids, approvers), nil
		}
		return anyIn(ids, q.Askers), nil
	}
	if approvers != nil {
		return anyIn(ids, approvers), nil
	}
	t, err := tx.Thread(q.Thread)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(ids, t.HasParticipant), nil
}

// selfApprove reports whether the askers of bot's work may approve it.
func (qs *questions) selfApprove(bot ActorID) bool {
	if qs.e.cfg().selfApprove {
		return true
	}
	b, ok := qs.e.bot(strings.TrimPrefix(string(bot), "bot:"))
	return ok && b.SelfApprove
}

// approvableTx reports whether anyone at all could approve q: an owner exists,
// a configured approver is not an asker, or self_approve lets an asker. An
// approval nobody could give is refused at once (pauseTx) instead of waiting
// out its timeout.
func (qs *questions) approvableTx(tx ReadTx, q Question) (bool, error) {
	d, err := loadPeopleTx(tx)
	if err != nil {
		return false, err
	}
	if qs.e.anyOwner(&d) {
		return true, nil
	}
	self := qs.selfApprove(q.Bot)
	pol, err := qs.e.threadPolicyByIDTx(tx, q.Thread)
	if err != nil {
		return false, err
	}
	approvers := qs.approversFor(q, pol.Approvers)
	if approvers == nil {
		return self && len(q.Askers) > 0, nil
	}
	for _, a := range approvers {
		if self || !anyIn(d.identities(a), q.Askers) {
			return true, nil
		}
	}
	return false, nil
}

// NoApproverNotice is the thread's notice when a bot's tool call needed an
// approval nobody could give: it names the tool and says how to add an approver.
func NoApproverNotice(handle, tool string) string {
	return fmt.Sprintf("@%s was not allowed to run %s: it needs an approval from someone other than the person who asked, "+
		"and nobody is set up to approve. To fix it, name owners (top-level owners: in the config, or openbot owner add <id>) "+
		"or approvers (approvers: in the config); or set self_approve: true to let people approve their own requests.", handle, tool)
}

// askersTx returns the people who asked for the work of a run with these
// triggers, in order of first appearance: the human senders among them, and for
// a bot's message (a hand-off) the askers of the run that posted it, followed
// back to the human message that started the chain. System messages ask nothing.
func askersTx(tx ReadTx, triggers []Message) ([]ActorID, error) {
	var out []ActorID
	seen := map[RunID]bool{}
	queue := append([]Message(nil), triggers...)
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		switch {
		case m.Sender == SystemActor:
		case !strings.HasPrefix(string(m.Sender), "bot:"):
			if !slices.Contains(out, m.Sender) {
				out = append(out, m.Sender)
			}
		case m.Run != 0 && !seen[m.Run] && len(seen) < maxAskerRuns:
			seen[m.Run] = true
			r, err := tx.Run(m.Run)
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return nil, err
			}
			ms, err := messagesTx(tx, r.Triggers)
			if err != nil {
				return nil, err
			}
			queue = append(queue, ms...)
		}
	}
	return out, nil
}

// messagesTx reads the messages ids, in order, leaving out those no longer
// stored (retention pruned them).
func messagesTx(tx ReadTx, ids []MessageID) ([]Message, error) {
	out := make([]Message, 0, len(ids))
	for _, id := range ids {
		m, err := tx.Message(id)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// addressedBots are the bots a human message addresses by name: its native
// mentions (except "*", the account's own all-team mention) and its @handles.
func (qs *questions) addressedBots(in Inbound) []string {
	set := qs.e.cfg()
	var out []string
	for _, h := range in.Mentions {
		if h = strings.ToLower(h); h != "*" && set.knownBot(h) && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	for _, h := range ParseMentions(in.Text, set.knownBot) {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// repliesTo reports whether in is a platform reply to one of q's posts
// (Inbound.ReplyToKey against the MessageKeyer key of each post).
func (qs *questions) repliesTo(q Question, in Inbound) bool {
	if in.ReplyToKey == "" {
		return false
	}
	for _, p := range q.Posts {
		if p.PlatformID == "" {
			continue
		}
		ad, ok := qs.e.adapter(p.Account)
		if !ok {
			continue
		}
		if mk, ok := ad.(MessageKeyer); ok && mk.MessageKey(p.Conversation, p.PlatformID) == in.ReplyToKey {
			return true
		}
	}
	return false
}

// meantFor reports whether a human message is meant as the answer to q: a reply
// to the question's message always is; otherwise it must address no other bot and
// no other person (DESIGN.md §5).
func (qs *questions) meantFor(q Question, in Inbound, addressed []string) bool {
	if qs.repliesTo(q, in) {
		return true
	}
	if in.MentionsHumans {
		return false
	}
	asker := strings.TrimPrefix(string(q.Bot), "bot:")
	for _, h := range addressed {
		if h != asker {
			return false
		}
	}
	return true
}
