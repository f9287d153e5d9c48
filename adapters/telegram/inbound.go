package telegram

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// handleUpdate processes one update. It returns an error only when the update must
// be offered again (Ingest failed), so the caller must not confirm it (polling
// offset, webhook 2xx). Updates openbot does not act on return nil.
func (a *Adapter) handleUpdate(ctx context.Context, u update) error {
	me, ok := a.Self()
	if !ok {
		return errNotReady
	}
	switch {
	case u.Message != nil:
		return a.handleMessage(ctx, me, u.Message)
	case u.CallbackQuery != nil:
		return a.handleCallback(ctx, u.CallbackQuery)
	}
	// edited_message and everything else: ignored (an edit must not start a run).
	return nil
}

// decision is what an inbound message means for openbot.
type decision struct {
	ignore   bool     // not for us
	dm       bool     // a private chat: the DM policy applies
	command  string   // lowercased command name without "/" and "@bot", "" for none
	mentions bool     // natively addressed to this account's bot
	speaker  string   // on a "*" account, the bot whose message this replies to
	humans   bool     // mentions someone who is neither this bot nor a team account
	peers    []string // handles of the team's other bot accounts it mentions
	// unaddressed: a group message that does not address this account's bot;
	// it is for the bots only where the channel's policy is open.
	unaddressed bool
}

// speakerOf returns, for a "*" account, the handle of the bot whose name heads one
// of this account's messages (the bold prefix Deliver writes), or "".
func (a *Adapter) speakerOf(text string) string {
	if a.bot != "*" {
		return ""
	}
	first, _, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	for _, b := range a.roster() {
		if first != "" && (strings.EqualFold(first, b.Name) || strings.EqualFold(first, b.Handle)) {
			return b.Handle
		}
	}
	return ""
}

// classify decides what starts a run (DESIGN.md §3): every message in a private
// chat (subject to the DM policy); in groups only a `mention` entity equal to this
// bot's @username (case-insensitive, whole entity), a `text_mention` of its user id,
// a reply to one of its messages (not the forum-topic creation message), or a
// command addressed to it (/cmd@this_bot); any other group message is marked
// unaddressed, for the bots only where the channel is open (admitted). /cmd@other_bot
// and bare /cmd in a group are ignored, as is every message from a bot and every
// message without text.
func (a *Adapter) classify(me tgbotapi.User, m *message) decision {
	text, ents := messageText(m)
	if m.From == nil || m.From.IsBot || (text == "" && !hasFiles(m)) {
		return decision{ignore: true}
	}
	private := m.Chat.Type == "private"
	var d decision
	if cmd, target, ok := leadingCommand(text, ents); ok {
		switch {
		case target != "" && !strings.EqualFold(target, me.UserName):
			return decision{ignore: true} // /cmd@other_bot
		case target == "" && !private:
			return decision{ignore: true} // a bare command in a group may be for any bot
		}
		d.command = cmd
		d.mentions = !private
	}
	u16 := utf16.Encode([]rune(text))
	for _, e := range ents {
		switch {
		case isSelfMention(me, u16, e):
			d.mentions = true
		case e.Type == "text_mention" && e.User != nil:
			if bot, ok := a.peers.bot(e.User.UserName); ok && e.User.IsBot {
				d.addPeer(bot)
			} else {
				d.humans = true
			}
		case e.Type == "mention":
			if s, ok := sliceEntity(u16, e); ok {
				if bot, ok := a.peers.bot(s); ok {
					d.addPeer(bot)
				} else {
					d.humans = true
				}
			}
		}
	}
	if r := m.ReplyToMessage; r != nil && len(r.ForumTopicCreated) == 0 && r.From != nil && r.From.ID == me.ID {
		d.mentions = true
		d.speaker = a.speakerOf(r.Text)
	}
	if private {
		d.dm = true
		d.mentions = false // every DM is for this account; core routes it
		return d
	}
	d.unaddressed = !d.mentions
	return d
}

// addPeer notes a mention of another of the team's bot accounts; a "*" account
// names no particular bot, so it only counts as not being a person.
func (d *decision) addPeer(bot string) {
	if bot != "*" && !slices.Contains(d.peers, bot) {
		d.peers = append(d.peers, bot)
	}
}

// messageText returns a message's text and entities, or its caption's.
func messageText(m *message) (string, []tgbotapi.MessageEntity) {
	if m.Text != "" {
		return m.Text, m.Entities
	}
	return m.Caption, m.CaptionEntities
}

// leadingCommand finds a bot_command entity at offset 0 and returns its name
// (lowercased, without "/") and the "@bot" it is addressed to, if any.
func leadingCommand(text string, ents []tgbotapi.MessageEntity) (cmd, target string, ok bool) {
	for _, e := range ents {
		if e.Type != "bot_command" || e.Offset != 0 {
			continue
		}
		s, ok := sliceEntity(utf16.Encode([]rune(text)), e)
		if !ok || !strings.HasPrefix(s, "/") {
			return "", "", false
		}
		cmd, target, _ = strings.Cut(s[1:], "@")
		return strings.ToLower(cmd), target, true
	}
	return "", "", false
}

// sliceEntity slices an entity out of text given as UTF-16 code units (entity
// offsets and lengths count UTF-16 units, not bytes or runes).
func sliceEntity(u16 []uint16, e tgbotapi.MessageEntity) (string, bool) {
	if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(u16) {
		return "", false
	}
	return string(utf16.Decode(u16[e.Offset : e.Offset+e.Length])), true
}

// isSelfMention reports whether e is a mention of this bot: "@username" exactly
// (case-insensitive; "@this_bot_two" is someone else) or a text_mention of its id.
func isSelfMention(me tgbotapi.User, u16 []uint16, e tgbotapi.MessageEntity) bool {
	switch e.Type {
	case "mention":
		s, ok := sliceEntity(u16, e)
		return ok && me.UserName != "" && strings.EqualFold(s, "@"+me.UserName)
	case "text_mention":
		return e.User != nil && e.User.ID == me.ID
	}
	return false
}

// listed reports whether a user is on allow_users.
func (a *Adapter) listed(u *tgbotapi.User) bool {
	if a.allow[strconv.FormatInt(u.ID, 10)] {
		return true
	}
	return u.UserName != "" && a.allow[strings.ToLower(u.UserName)]
}

// normalizeText rewrites native mentions of this bot to "@handle" (removes them for
// a "*" account, whose mention means the thread's default bot), mentions of the
// team's other bot accounts to their "@handle", and drops the
// "@this_bot" suffix of a leading command (DESIGN.md §3 "Mentions").
func (a *Adapter) normalizeText(me tgbotapi.User, text string, ents []tgbotapi.MessageEntity) string {
	u16 := utf16.Encode([]rune(text))
	type edit struct {
		off, n int
		with   string
	}
	var edits []edit
	repl := ""
	if a.bot != "*" {
		repl = "@" + a.bot
	}
	for _, e := range ents {
		switch {
		case isSelfMention(me, u16, e):
			n := e.Length
			if repl == "" && e.Offset+n < len(u16) && u16[e.Offset+n] == ' ' {
				n++ // removing the mention also removes the space after it
			}
			edits = append(edits, edit{e.Offset, n, repl})
		case e.Type == "mention":
			// Another of the team's accounts ("@qa_bot") becomes its handle ("@qa").
			if s, ok := sliceEntity(u16, e); ok {
				if bot, ok := a.peers.bot(s); ok && bot != "*" {
					edits = append(edits, edit{e.Offset, e.Length, "@" + bot})
				}
			}
		case e.Type == "bot_command" && e.Offset == 0:
			if s, ok := sliceEntity(u16, e); ok {
				if at := strings.IndexByte(s, '@'); at > 0 {
					cmd := s[:at]
					edits = append(edits, edit{e.Offset, e.Length, cmd})
				}
			}
		}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].off > edits[j].off })
	for _, ed := range edits {
		with := utf16.Encode([]rune(ed.with))
		u16 = append(u16[:ed.off:ed.off], append(with, u16[ed.off+ed.n:]...)...)
	}
	return strings.TrimSpace(string(utf16.Decode(u16)))
}

// conversationOf returns where a message was posted: its chat, and its forum topic
// when it is a topic message (a reply thread in a plain supergroup also carries
// message_thread_id but is not a topic).
func conversationOf(m *message) Conversation {
	c := Conversation{Chat: m.Chat.ID}
	if m.IsTopicMessage && m.MessageThreadID > 0 {
		c.Topic = m.MessageThreadID
	}
	return c
}

func displayName(u *tgbotapi.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	switch {
	case name != "":
		return name
	case u.UserName != "":
		return u.UserName
	}
	return strconv.FormatInt(u.ID, 10)
}

// handleMessage turns one message into an Inbound, a direct reply (/help, a
// people command, a DM refusal or pairing code) or nothing. Only store errors
// are returned.
func (a *Adapter) handleMessage(ctx context.Context, me tgbotapi.User, m *message) error {
	d := a.classify(me, m)
	conv := conversationOf(m)
	if d.ignore {
		return nil
	}
	if name, args, ok := core.ParseCommand(text(m)); ok && d.command != "" {
		return a.handlePeopleCommand(ctx, m, conv, name, args) // never ingested, no model call
	}
	if ok, err := a.admitted(ctx, m, d, conv); err != nil || !ok {
		return err
	}
	switch {
	case d.command == "help":
		a.reply(ctx, conv, m.MessageID, a.helpText(conv))
		return nil
	case d.command == "stop":
		return a.handleStop(ctx, me, m, conv) // stop.go: never ingested, no model call
	case d.command == "usage":
		a.reply(ctx, conv, m.MessageID, a.usageText(ctx, conv.ThreadKey(me.ID)))
		return nil
	case d.command == "start":
		a.reply(ctx, conv, m.MessageID, "Hi! Write a message and the team answers here.\n\n"+a.helpText(conv))
		return nil
	}
	in := a.inboundOf(me, m, d)
	if d.command == "new" {
		// "/new" alone starts a new conversation with the next message; "/new TEXT"
		// starts it with TEXT. The flag is stored, so a restart does not lose it.
		in.Text = strings.TrimSpace(strings.TrimPrefix(in.Text, "/new"))
		if in.Text == "" {
			if err := a.setPendingNew(ctx, conv, true); err != nil {
				return err
			}
			a.reply(ctx, conv, m.MessageID, "Started a new conversation: your next message begins it.")
			return nil
		}
	} else if pending, err := a.pendingNew(ctx, conv); err != nil {
		return err
	} else if pending {
		in.NewThread = true
	}
	in = withCommandText(in, d)
	if _, err := a.engine.Ingest(ctx, in); err != nil {
		return fmt.Errorf("telegram: ingest %s: %w", in.DedupKey, err)
	}
	if in.NewThread {
		return a.setPendingNew(ctx, conv, false)
	}
	return nil
}

// inboundOf is the Inbound for a message classify let through (DESIGN.md §3). Its
// Text may be empty for a bare command; see withCommandText.
func (a *Adapter) inboundOf(me tgbotapi.User, m *message, d decision) core.Inbound {
	conv := conversationOf(m)
	text, ents := messageText(m)
	in := core.Inbound{
		Account:      a.account,
		Platform:     Platform,
		DedupKey:     DedupKey(me.ID, m.Chat.ID, m.MessageID),
		ThreadKey:    conv.ThreadKey(me.ID),
		Conversation: conv.Ref(),
		PlatformID:   strconv.FormatInt(m.MessageID, 10),
		SenderID:     HumanActor(m.From.ID),
		SenderName:   displayName(m.From),
		Text:         a.normalizeText(me, text, ents),
		StartThread:  true,
		NewThread:    d.command == "new",
		Received:     time.Unix(m.Date, 0).UTC(),
		Attachments:  attachmentsOf(m),
	}
	if a.bot != "*" {
		in.DefaultBot = a.bot
	}
	if r := m.ReplyToMessage; r != nil && len(r.ForumTopicCreated) == 0 {
		// A reply chain: a reply to a message of an older dialog joins that dialog.
		in.ReplyToKey = DedupKey(me.ID, m.Chat.ID, r.MessageID)
	}
	switch {
	case d.speaker != "":
		in.Mentions = []string{d.speaker} // a reply to a bot speaking through a "*" account
	case d.mentions:
		in.Mentions = []string{a.mentionHandle()}
	}
	// A mention of a person (or of a bot that is not one of the team's accounts)
	// marks the message as addressed to someone else: it is not the answer to a
	// free-text question (DESIGN.md §5) and, naming no bot, wakes none.
	in.MentionsHumans = d.humans
	for _, h := range d.peers {
		if !slices.Contains(in.Mentions, h) {
			in.Mentions = append(in.Mentions, h)
		}
	}
	return in
}

// withCommandText gives a message that is only a command its command as text.
func withCommandText(in core.Inbound, d decision) core.Inbound {
	if in.Text == "" && d.command != "" {
		in.Text = "/" + d.command
	}
	return in
}

// Without a Cursors store a pending /new lives in memory: at most maxPendingNew
// conversations (the least recently marked forgotten first), each for at most
// pendingNewTTL (memory flat under bursts, DESIGN.md §9).
const (
	maxPendingNew = 4096
	pendingNewTTL = 24 * time.Hour
)

// pendingNewName is the cursor that remembers a bare /new in a conversation.
func (a *Adapter) pendingNewName(conv Conversation) string {
	return "telegram/" + a.name + "/new/" + string(conv.Ref())
}

// pendingNew reports whether a bare /new waits for the next message in conv.
func (a *Adapter) pendingNew(ctx context.Context, conv Conversation) (bool, error) {
	if a.cursors == nil {
		on, _ := a.newPending.Get(conv, time.Now())
		return on, nil
	}
	return core.Flag(ctx, a.cursors, a.pendingNewName(conv))
}

func (a *Adapter) setPendingNew(ctx context.Context, conv Conversation, on bool) error {
	if a.cursors == nil {
		if on {
			a.newPending.Put(conv, true, time.Now())
		} else {
			a.newPending.Delete(conv)
		}
		return nil
	}
	return core.SetFlag(ctx, a.cursors, a.pendingNewName(conv), on)
}

// helpText lists the team for /help.
func (a *Adapter) helpText(conv Conversation) string {
	var b strings.Builder
	b.WriteString(core.TeamRoster(a.roster()))
	newCmd := "/new"
	if me, ok := a.Self(); ok && conv.Chat < 0 {
		newCmd = "/new@" + me.UserName // a bare /new in a group may be for any bot
	}
	b.WriteString("\nIn a private chat every message is answered; in a group, mention me or reply to me (where the group is open, any message is answered). " +
		"Write @handle to ask a specific bot. " + newCmd + " starts a new conversation; " +
		strings.Replace(newCmd, "/new", "/stop", 1) + " stops the bots' work in it; " +
		strings.Replace(newCmd, "/new", "/compact", 1) + " summarises its older part for the bots now; /usage shows spend and budgets.")
	return b.String()
}

// reply sends a short plain-text answer that is not stored (a /help list, a DM
// refusal), as a reply to message id. Failures are logged, not returned: the update
// is still confirmed, so a broken chat cannot stall the poller.
func (a *Adapter) reply(ctx context.Context, conv Conversation, id int64, text string) {
	if _, err := a.send(ctx, conv, text, "", id); err != nil {
		a.log.Warn("direct reply failed", "chat", conv.Chat, "err", err)
	}
}

// admitted applies the DM policy (private chats) or the channel policy
// (groups) through the engine; a refusal is logged and counted, and answered
// with the engine's reply when it has one. Only store errors are returned.
func (a *Adapter) admitted(ctx context.Context, m *message, d decision, conv Conversation) (bool, error) {
	if d.dm && a.policy == DMOpen {
		return true, nil
	}
	adm := core.Admission{Account: a.account, Actor: HumanActor(m.From.ID), Name: displayName(m.From)}
	var ad core.Admitted
	var err error
	if d.dm {
		adm.Policy, adm.Listed = a.policy, a.listed(m.From)
		ad, err = core.AdmitDM(ctx, a.engine, adm)
	} else {
		adm.Conversation, adm.Unaddressed = conv.Ref(), d.unaddressed
		ad, err = core.AdmitGroup(ctx, a.engine, adm)
	}
	if err != nil {
		return false, fmt.Errorf("telegram: admit %d in %d: %w", m.From.ID, m.Chat.ID, err)
	}
	if d.unaddressed && !ad.Open {
		return false, nil // group chatter that is not for the bots: the channel is not open
	}
	if !ad.Allow {
		a.log.Warn("refused a message by policy", "user", m.From.ID, "chat", m.Chat.ID, "dm", d.dm, "dm_policy", a.policy)
		core.ReportInbound(a.engine, "telegram", core.InboundRefused)
		if ad.Reply != "" {
			a.reply(ctx, conv, m.MessageID, ad.Reply)
		}
	}
	return ad.Allow, nil
}

// text returns a message's text or caption.
func text(m *message) string {
	t, _ := messageText(m)
	return t
}

// handlePeopleCommand answers /pair, /people and /revoke (core.Commander) with a
// plain reply; in a group only "/cmd@this_bot" reaches here.
func (a *Adapter) handlePeopleCommand(ctx context.Context, m *message, conv Conversation, name, args string) error {
	c, ok := a.engine.(core.Commander)
	if !ok {
		a.reply(ctx, conv, m.MessageID, "That command is not available here.")
		return nil
	}
	reply, err := c.Command(ctx, core.Command{Name: name, Args: args, Actor: HumanActor(m.From.ID), ActorName: displayName(m.From),
		Account: a.account, Conversation: conv.Ref(), Direct: conv.Chat > 0, ThreadKey: a.threadKey(conv)})
	if err != nil {
		return fmt.Errorf("telegram: /%s in %d: %w", name, conv.Chat, err)
	}
	a.log.Info("telegram people command", "command", name, "chat", conv.Chat, "user", m.From.ID)
	a.reply(ctx, conv, m.MessageID, reply)
	return nil
}

// threadKey is conv's thread key as this account's bot sees it.
func (a *Adapter) threadKey(conv Conversation) string {
	me, _ := a.Self()
	return conv.ThreadKey(me.ID)
}
