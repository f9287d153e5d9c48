package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"openbot/core"
)

// message is the part of an app_mention or message event the adapter uses.
type message struct {
	Team, Channel, ChannelType string
	User, BotID, SubType       string
	Text, TS, ThreadTS         string
	Edited                     bool
	Files                      []slack.File
}

// handleEvent turns one Events API callback (from HTTP or Socket Mode) into at most
// one core.Inbound and ingests it (DESIGN.md §3, §4). It returns an error only when
// the engine failed to store the message, so the caller can make Slack retry.
// Events that are not for openbot (bot and own messages, edits, joins, other event
// types, channels or users outside the allow lists) return nil.
func (a *Adapter) handleEvent(ctx context.Context, ev slackevents.EventsAPIEvent) error {
	if ev.Type != slackevents.CallbackEvent {
		a.refuse("unknown event envelope type", "type", ev.Type)
		return nil
	}
	var m message
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		m = message{Channel: e.Channel, User: e.User, BotID: e.BotID, Text: e.Text, TS: e.TimeStamp,
			ThreadTS: e.ThreadTimeStamp, Edited: e.Edited != nil, Files: e.Files}
	case *slackevents.MessageEvent:
		m = message{Channel: e.Channel, ChannelType: e.ChannelType, User: e.User, BotID: e.BotID,
			SubType: e.SubType, Text: e.Text, TS: e.TimeStamp, ThreadTS: e.ThreadTimeStamp}
		if e.Message != nil && e.Message.Edited != nil {
			m.Edited = true
		}
		if e.Message != nil {
			m.Files = e.Message.Files // the unmarshaller fills Message for plain messages too
		}
	default:
		a.refuse("event type openbot does not subscribe to", "type", ev.InnerEvent.Type)
		return nil
	}
	m.Team = ev.TeamID
	return a.handleMessage(ctx, m)
}

// ignoredSubtype reports message subtypes that never start work. A plain message,
// a thread reply also sent to the channel and a file share with text are kept.
func ignoredSubtype(st string) bool {
	switch st {
	case "", "thread_broadcast", "file_share":
		return false
	}
	return true // bot_message, message_changed, message_deleted, channel_join, …
}

func (a *Adapter) handleMessage(ctx context.Context, m message) error {
	log := a.log.With("channel", m.Channel, "ts", m.TS)
	switch {
	case m.TS == "":
		a.refuse("message event without ts", "channel", m.Channel)
		return nil
	case m.Channel == "":
		a.refuse("message event without channel", "ts", m.TS)
		return nil
	case m.User == "" && m.BotID == "" && !ignoredSubtype(m.SubType):
		a.refuse("message event without user", "channel", m.Channel, "ts", m.TS)
		return nil
	}
	if m.User == "" || m.BotID != "" || ignoredSubtype(m.SubType) || m.Edited {
		log.Debug("slack event ignored", "subtype", m.SubType, "bot_id", m.BotID, "edited", m.Edited)
		return nil
	}
	id, err := a.identity(ctx)
	if err != nil {
		return err
	}
	if m.User == id.UserID {
		log.Debug("slack event ignored: own message")
		return nil
	}
	if (a.allowCh != nil && !a.allowCh[m.Channel]) || (a.allowU != nil && !a.allowU[m.User]) {
		// A message that addresses openbot (a DM, a mention of this app) is a
		// refused request; other chatter in a channel the app sits in is not.
		if isDMChannel(m.Channel, m.ChannelType) || strings.Contains(m.Text, "<@"+id.UserID) {
			a.refuse("channel or user not on the allow list", "channel", m.Channel, "user", m.User)
		} else {
			log.Debug("slack event ignored: not allowed", "user", m.User)
		}
		return nil
	}
	m.Team = cmp.Or(m.Team, id.Team)
	text, self, humans := a.normalize(ctx, m.Text, id.UserID)
	dm := isDMChannel(m.Channel, m.ChannelType)
	botMentioned := self || a.mentionsBot(text)
	if name, args, ok := core.ParseCommand(text); ok && (dm || self) {
		return a.handlePeopleCommand(ctx, m, dm, name, args) // never ingested, no model call
	}
	if dm {
		ad, err := core.AdmitDM(ctx, a.engine, core.Admission{Account: a.Account(), Actor: HumanActor(m.Team, m.User),
			Name: a.userName(ctx, m.User), Policy: a.dmPolicy, Listed: a.allowU[m.User]})
		if err != nil {
			return fmt.Errorf("slack admit %s: %w", m.User, err)
		}
		if !ad.Allow {
			a.refuse("DM refused by dm_policy "+a.dmPolicy, "channel", m.Channel, "user", m.User)
			if ad.Reply != "" {
				a.confirm(ctx, m.Channel, ad.Reply)
			}
			return nil
		}
	}
	if stopCommand(text) && (dm || botMentioned || strings.HasPrefix(strings.TrimSpace(text), "/")) {
		return a.handleStop(ctx, m, dm, self) // see stop.go: never ingested, no model call
	}
	if bot, ok := a.plainUsage(text, dm, self); ok {
		return a.handleUsage(ctx, m, dm, bot) // see usage.go: never ingested, no model call
	}
	open := false
	if !dm {
		ad, err := core.AdmitGroup(ctx, a.engine, core.Admission{Account: a.Account(), Actor: HumanActor(m.Team, m.User),
			Conversation: ReplyConversation(m.Team, m.Channel, m.TS, m.ThreadTS, false).Ref(), Unaddressed: !botMentioned})
		if err != nil {
			return fmt.Errorf("slack admit %s in %s: %w", m.User, m.Channel, err)
		}
		if m.ThreadTS == "" && !botMentioned && !ad.Open {
			// A top-level channel post roots a thread of its own, which openbot cannot
			// know yet: without a bot mention it starts nothing, unless the channel's
			// policy is open (DESIGN.md §3).
			log.Debug("slack event ignored: top-level post without a bot mention")
			return nil
		}
		if !ad.Allow {
			a.refuse("message refused by the channel policy", "channel", m.Channel, "user", m.User)
			if ad.Reply != "" {
				a.ephemeral(ctx, m.Channel, m.User, m.ThreadTS, ad.Reply)
			}
			return nil
		}
		open = ad.Open
	}
	in := core.Inbound{
		Account:      a.Account(),
		Platform:     "slack",
		DedupKey:     DedupKey(m.Team, m.Channel, m.TS),
		ThreadKey:    ThreadKey(m.Team, m.Channel, m.TS, m.ThreadTS, dm),
		Conversation: ReplyConversation(m.Team, m.Channel, m.TS, m.ThreadTS, dm).Ref(),
		PlatformID:   m.TS,
		SenderID:     HumanActor(m.Team, m.User),
		SenderName:   a.userName(ctx, m.User),
		Text:         text,
		Received:     tsTime(m.TS),
		Attachments:  attachmentsOf(m.Files),
	}
	if a.bot != "*" {
		in.DefaultBot = a.bot
	}
	if self && (a.bot != "*" || !a.mentionsBot(text)) {
		// For a "*" app the mention of the app is transport, not a target: it means
		// the thread's default bot ("*") only when no bot is named in the text.
		// Core applies the same rule; dropping it here also keeps a second app's
		// copy of the message from waking the default bot (DESIGN.md §3 Mentions).
		in.Mentions = []string{a.bot}
	}
	in.StartThread = dm || botMentioned || open // in an open channel any message may start a thread
	in.MentionsHumans = humans && !botMentioned
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		if err := a.joinBotParent(ctx, &in, m, dm, botMentioned || humans); err != nil {
			return err
		}
	}
	if dm && m.ThreadTS == "" {
		// The plain-text /new of a DM (see commands.go), and a stored /new that
		// makes this message begin a new thread.
		if rest, ok := newCommand(text); ok {
			if rest == "" {
				if err := a.setPendingNew(ctx, m.Team, m.Channel, true); err != nil {
					return fmt.Errorf("slack /new in %s: %w", m.Channel, err)
				}
				log.Info("slack new conversation pending")
				a.confirm(ctx, m.Channel, replyNewPending)
				return nil
			}
			in.Text, in.NewThread = rest, true
		} else if pending, err := a.pendingNew(ctx, m.Team, m.Channel); err != nil {
			return fmt.Errorf("slack /new in %s: %w", m.Channel, err)
		} else if pending {
			in.NewThread = true
		}
	}
	res, err := a.engine.Ingest(ctx, in)
	if err != nil {
		return fmt.Errorf("slack ingest %s: %w", in.DedupKey, err)
	}
	if in.NewThread && !res.Duplicate {
		if err := a.setPendingNew(ctx, m.Team, m.Channel, false); err != nil {
			return fmt.Errorf("slack /new in %s: %w", m.Channel, err)
		}
	}
	log.Debug("slack message ingested", "thread", res.Thread, "duplicate", res.Duplicate, "dropped", res.Dropped, "woken", res.Woken)
	return nil
}

// joinBotParent makes a reply in the Slack thread of a message a bot posted
// continue that bot's openbot thread. A bot's reply in a DM, and any message a bot
// posts at the top level of a conversation, can become the root of a Slack thread;
// its thread_ts is then no thread key openbot knows, only the ts of a delivered
// message (recorded through MessageKey). The message joins that message's thread
// (Inbound.ReplyToKey), is bound to the conversation the bot's message went to
// (the top level, so later replies are not posted twice), and when it addresses
// nobody in particular it is for the bot whose message it answers.
func (a *Adapter) joinBotParent(ctx context.Context, in *core.Inbound, m message, dm, addressed bool) error {
	parent := DedupKey(m.Team, m.Channel, m.ThreadTS)
	who, ok, err := a.state.BotParent(ctx, ThreadKey(m.Team, m.Channel, m.TS, m.ThreadTS, dm), parent)
	if err != nil {
		return fmt.Errorf("slack reply to %s: %w", parent, err)
	}
	if !ok {
		return nil
	}
	in.ReplyToKey = parent
	in.Conversation = Conversation{Team: m.Team, Channel: m.Channel}.Ref()
	in.StartThread = true
	if h := botHandle(who); h != "" && !addressed {
		in.Mentions = []string{h}
	}
	return nil
}

// tsTime converts a Slack ts ("1767225600.000100") to a time; zero if malformed.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	var us int64
	if frac != "" {
		frac = (frac + "000000")[:6]
		us, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(s, us*1000).UTC()
}

var (
	// <@U123>, <@U123|name>, <#C123|name>, <!here>, <!subteam^S1|@team>, <url|label>
	controlRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([@#!]?)([^<>|]*)(?:\|([^<>]*))?>`) })
	handleRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|[^\w@./])@([A-Za-z0-9][A-Za-z0-9_\-]*)`) })
)

// normalize rewrites Slack's control sequences into what the model should read
// (DESIGN.md §3 Mentions): a mention of this app's bot user becomes "@handle" (for a "*"
// app it is removed, since core resolves it to the thread's default bot), other
// users become "@Display Name" (a Slack bot user named like a configured bot becomes
// "@handle"), channels "#name", links "[label](url)" or the bare url, and &amp;,
// &lt;, &gt; are unescaped. It reports whether the app's own bot user was mentioned
// and whether other people (not bots) were.
func (a *Adapter) normalize(ctx context.Context, text, selfID string) (out string, self, humans bool) {
	out = controlRe().ReplaceAllStringFunc(text, func(seq string) string {
		m := controlRe().FindStringSubmatch(seq)
		kind, body, label := m[1], m[2], m[3]
		switch kind {
		case "@":
			if body == selfID {
				self = true
				if a.bot == "*" {
					return "\x00" // removed below with one adjacent space
				}
				return "@" + a.bot
			}
			if h := a.botHandleOf(ctx, body); h != "" {
				return "@" + h
			}
			humans = true
			return "@" + a.userName(ctx, body)
		case "#":
			if label != "" {
				return "#" + label
			}
			return "#" + body
		case "!":
			if label != "" {
				return label
			}
			cmd, _, _ := strings.Cut(body, "^")
			return "@" + cmd
		}
		if label != "" && label != body {
			return "[" + label + "](" + body + ")"
		}
		return body
	})
	out = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(out)
	out = strings.NewReplacer("\x00 ", "", " \x00", "", "\x00", "").Replace(out)
	return strings.TrimSpace(out), self, humans
}

// mentionsBot reports whether text has an @handle of a configured bot.
func (a *Adapter) mentionsBot(text string) bool {
	for _, m := range handleRe().FindAllStringSubmatch(text, -1) {
		if _, ok := a.roster()[strings.ToLower(m[1])]; ok {
			return true
		}
	}
	return false
}

// userName returns a user's display name (display name, else real name, else user
// name) through users.info, cached; on failure the user id itself.
func (a *Adapter) userName(ctx context.Context, userID string) string {
	if u, ok := a.lookupUser(ctx, userID); ok {
		return u.name
	}
	return userID
}

// botHandleOf returns the configured bot handle a Slack bot user stands for (another
// openbot app in the workspace), matched by its user, real or display name, or "".
func (a *Adapter) botHandleOf(ctx context.Context, userID string) string {
	u, ok := a.lookupUser(ctx, userID)
	if !ok || !u.isBot {
		return ""
	}
	bots := a.roster()
	for _, n := range u.names {
		key := strings.ToLower(strings.NewReplacer(" ", "_", "-", "_").Replace(n))
		if _, ok := bots[key]; ok {
			return bots[key].Handle
		}
		for _, b := range bots {
			if b.Name != "" && strings.EqualFold(b.Name, n) {
				return b.Handle
			}
		}
	}
	return ""
}

// cachedUser is what users.info told us about a user.
type cachedUser struct {
	name  string   // best display name
	names []string // every non-empty name, best first
	isBot bool
}

func (a *Adapter) lookupUser(ctx context.Context, userID string) (cachedUser, bool) {
	now := a.clock.Now()
	if u, ok := a.users.Get(userID, now); ok {
		return u, true
	}
	ctx, cancel := context.WithTimeout(ctx, userInfoTimeout)
	defer cancel()
	info, err := a.api.GetUserInfoContext(ctx, userID)
	if err != nil {
		a.log.Debug("slack users.info failed", "user", userID, "err", err)
		var se slack.SlackErrorResponse
		if errors.As(err, &se) { // a definite answer (user_not_found): remember it
			a.users.Put(userID, cachedUser{name: userID}, now)
		}
		return cachedUser{}, false
	}
	u := cachedUser{isBot: info.IsBot}
	for _, n := range []string{info.Profile.DisplayName, info.Profile.RealName, info.RealName, info.Name} {
		if n = strings.TrimSpace(n); n != "" {
			u.name = cmp.Or(u.name, n)
			u.names = append(u.names, n)
		}
	}
	u.name = cmp.Or(u.name, userID)
	a.users.Put(userID, u, now)
	return u, true
}
