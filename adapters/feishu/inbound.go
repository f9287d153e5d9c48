package feishu

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"openbot/core"
)

// errNotReady is returned while the bot's open_id is unknown: mentions cannot be
// resolved, so the event is refused and the platform redelivers it.
var errNotReady = errors.New("feishu: bot open_id not known yet")

// ingestTimeout bounds one Ingest so that, with the sender-name lookup
// (nameLookupWait), the platform gets its answer within 3 s.
const ingestTimeout = 2 * time.Second

// envelope is any webhook body or long-connection payload after decryption: a v2
// event, a url_verification challenge, or a legacy card callback (flat). Card
// callbacks are answered by cardAction, not handleEvent.
// https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/request-url-configuration-case
type envelope struct {
	Schema string `json:"schema"`
	Header struct {
		EventID    string `json:"event_id"`
		EventType  string `json:"event_type"`
		Token      string `json:"token"`
		CreateTime string `json:"create_time"`
		AppID      string `json:"app_id"`
	} `json:"header"`
	Event     json.RawMessage `json:"event"`
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	Token     string          `json:"token"`
	Encrypt   *string         `json:"encrypt"`
	// A legacy card callback is flat: the clicker, the card's message and the
	// action at the top level.
	OpenID        string      `json:"open_id"`
	OpenMessageID string      `json:"open_message_id"`
	Action        *cardAction `json:"action"`
}

// messageEvent is the part of im.message.receive_v1 the adapter reads, flattened
// from the SDK's larkim.P2MessageReceiveV1Data (the wire type, all pointers) by
// messageEventFrom.
// https://open.feishu.cn/document/server-docs/im-v1/message/events/receive
type messageEvent struct {
	Sender struct {
		SenderID   userID
		SenderType string
	}
	Message struct {
		MessageID   string
		RootID      string
		ParentID    string
		ThreadID    string
		ChatID      string
		ChatType    string // "p2p", "group", "topic_group"
		MessageType string
		Content     string // JSON string, decoded a second time
		CreateTime  string
		Mentions    []mention
	}
}

type userID struct {
	OpenID  string
	UserID  string
	UnionID string
}

type mention struct {
	Key  string // "@_user_1"
	ID   userID
	Name string
}

func userIDFrom(u *larkim.UserId) userID {
	if u == nil {
		return userID{}
	}
	return userID{OpenID: str(u.OpenId), UserID: str(u.UserId), UnionID: str(u.UnionId)}
}

// messageEventFrom flattens the SDK's event type; ok is false when it has no message.
func messageEventFrom(d *larkim.P2MessageReceiveV1Data) (ev messageEvent, ok bool) {
	if d == nil || d.Message == nil {
		return ev, false
	}
	if s := d.Sender; s != nil {
		ev.Sender.SenderID, ev.Sender.SenderType = userIDFrom(s.SenderId), str(s.SenderType)
	}
	m, em := &ev.Message, d.Message
	m.MessageID, m.RootID, m.ParentID, m.ThreadID = str(em.MessageId), str(em.RootId), str(em.ParentId), str(em.ThreadId)
	m.ChatID, m.ChatType, m.MessageType = str(em.ChatId), str(em.ChatType), str(em.MessageType)
	m.Content, m.CreateTime = str(em.Content), str(em.CreateTime)
	for _, mn := range em.Mentions {
		if mn != nil {
			m.Mentions = append(m.Mentions, mention{Key: str(mn.Key), ID: userIDFrom(mn.Id), Name: str(mn.Name)})
		}
	}
	return ev, true
}

// handleEvent dispatches one verified event. It returns an error only when the
// event should be redelivered (ingest failed, or the bot is not identified yet).
func (a *Adapter) handleEvent(ctx context.Context, env *envelope) error {
	switch env.Header.EventType {
	case "im.message.receive_v1":
		var d larkim.P2MessageReceiveV1Data
		err := json.Unmarshal(env.Event, &d)
		ev, ok := messageEventFrom(&d)
		if err != nil || !ok {
			a.log.Warn("feishu malformed message event; ignoring", "event_id", env.Header.EventID, "err", err)
			core.ReportInbound(a.engine, "feishu", core.InboundDropped)
			return nil
		}
		return a.handleMessage(ctx, &ev)
	default:
		a.log.Warn("feishu event of a type openbot does not handle; acknowledged (unsubscribe it in the developer console)",
			"event_type", env.Header.EventType, "event_id", env.Header.EventID)
		core.ReportInbound(a.engine, "feishu", core.InboundDropped)
		return nil
	}
}

// handleMessage turns one im.message.receive_v1 into a core.Inbound (DESIGN.md §3)
// and ingests it, or answers a command (/new, /help, /stop) or sends a short notice, or
// ignores it. A reply (parent_id) to a message openbot stored or delivered joins
// that message's thread (Inbound.ReplyToKey), in p2p chats and groups alike.
func (a *Adapter) handleMessage(ctx context.Context, ev *messageEvent) error {
	m := &ev.Message
	if ev.Sender.SenderType != "" && ev.Sender.SenderType != "user" {
		return nil // never respond to apps, this one included
	}
	botID := a.BotOpenID()
	if botID == "" {
		return errNotReady
	}
	sender := ev.Sender.SenderID.OpenID
	p2p := m.ChatType == "p2p"
	inThread := !p2p // notices in a group go to the message's topic thread
	native := false
	for _, mn := range m.Mentions {
		if mn.ID.OpenID == botID {
			native = true
		}
	}
	text, supported := messageText(m.MessageType, m.Content, m.Mentions, botID, a.botMentionText())
	if p2p || native {
		bare, _ := messageText(m.MessageType, m.Content, m.Mentions, botID, "")
		if name, args, ok := core.ParseCommand(bare); ok && strings.HasPrefix(strings.TrimSpace(bare), "/") {
			key := ThreadKey(m.ChatID, m.MessageID, m.RootID)
			if p2p {
				key = DialogKey(m.ChatID)
			}
			return a.handlePeopleCommand(ctx, ActorID(sender), m.ChatID, m.MessageID, key, p2p, name, args) // never ingested
		}
	}
	if p2p {
		ad, err := core.AdmitDM(ctx, a.engine, core.Admission{Account: a.account, Actor: ActorID(sender), Policy: a.dmPolicy,
			Listed: a.allow[sender] || a.allow[ev.Sender.SenderID.UserID]})
		if err != nil {
			return fmt.Errorf("feishu: admit %s: %w", sender, err)
		}
		if !ad.Allow {
			a.log.Warn("feishu dm refused", "open_id", sender, "message_id", m.MessageID, "dm_policy", a.dmPolicy)
			core.ReportInbound(a.engine, "feishu", core.InboundRefused)
			if ad.Reply != "" {
				a.queueNotice(m.MessageID, ad.Reply, false)
			}
			return nil
		}
	}
	atts, isFile := fileAttachments(m.MessageType, m.Content, m.MessageID) // files.go
	if !supported && !isFile {
		if p2p || native {
			a.queueNotice(m.MessageID, fmt.Sprintf("Sorry, %s messages are not supported yet; please send text.", m.MessageType), inThread)
		}
		return nil
	}
	in := core.Inbound{
		Account:    a.account,
		Platform:   Platform,
		DedupKey:   DedupKey(m.MessageID),
		PlatformID: m.MessageID,
		SenderID:   ActorID(sender),
		Text:       text,
		Received:   msTime(m.CreateTime),
	}
	in.Attachments = atts
	if a.bot != "*" {
		in.DefaultBot = a.bot
	}
	if native {
		in.Mentions = []string{a.bot}
	}
	var conv Conversation
	if p2p {
		in.ThreadKey = DialogKey(m.ChatID)
		conv = Conversation{Chat: m.ChatID}
		in.StartThread = true
	} else {
		mentioned := native || a.textMentionsBot(text)
		ad, err := core.AdmitGroup(ctx, a.engine, core.Admission{Account: a.account, Actor: ActorID(sender),
			Conversation: Conversation{Chat: m.ChatID}.Ref(), Unaddressed: !mentioned})
		if err != nil {
			return fmt.Errorf("feishu: admit %s in %s: %w", sender, m.ChatID, err)
		}
		if m.RootID == "" && !mentioned && !ad.Open {
			return nil // a top-level group message that is not for openbot: the group is not open
		}
		if !ad.Allow {
			a.log.Warn("feishu message refused by the channel policy", "open_id", sender, "chat", m.ChatID, "message_id", m.MessageID)
			core.ReportInbound(a.engine, "feishu", core.InboundRefused)
			if ad.Reply != "" {
				a.queueNotice(m.MessageID, ad.Reply, inThread)
			}
			return nil
		}
		in.ThreadKey = ThreadKey(m.ChatID, m.MessageID, m.RootID)
		root := cmp.Or(m.RootID, m.MessageID)
		conv = Conversation{Chat: m.ChatID, Root: root}
		in.StartThread = mentioned || ad.Open // in an open group any message may start a thread
		in.MentionsHumans = !mentioned && len(m.Mentions) > 0
	}
	in.Conversation = conv.Ref()
	if m.ParentID != "" && (p2p || m.ParentID != m.RootID) {
		// A reply to a specific message: when openbot stored or delivered it, this
		// joins its thread. In a group topic a plain message names the topic root
		// as its parent; that is the topic's own thread key, which /new may have
		// moved on, so only a reply to another message counts.
		in.ReplyToKey = DedupKey(m.ParentID)
	}

	// Commands: every message in a p2p chat, in a group only when it mentions
	// this app's bot natively ("@Bot /new"), as Telegram's /cmd@this_bot.
	if p2p || native {
		bare, _ := messageText(m.MessageType, m.Content, m.Mentions, botID, "")
		if _, ok := command(bare, "/help"); ok {
			a.queueNotice(m.MessageID, a.helpText(p2p), inThread)
			return nil
		}
		if _, ok := command(bare, "/stop"); ok {
			return a.handleStop(ctx, in, m.MessageID, inThread) // stop.go: never ingested
		}
		if _, ok := command(bare, "/usage"); ok {
			a.queueNotice(m.MessageID, a.usageText(ctx, in.ThreadKey), inThread)
			return nil
		}
		if rest, ok := command(bare, "/new"); ok {
			if rest == "" {
				if err := a.setPendingNew(ctx, conv, true); err != nil {
					return fmt.Errorf("feishu: remembering /new in %s: %w", conv.Ref(), err)
				}
				a.queueNotice(m.MessageID, "OK, your next message here starts a new conversation.", inThread)
				return nil
			}
			in.Text, in.NewThread = rest, true
		}
	}
	if !in.NewThread {
		pending, err := a.pendingNew(ctx, conv)
		if err != nil {
			return fmt.Errorf("feishu: reading /new of %s: %w", conv.Ref(), err)
		}
		in.NewThread = pending
	}
	in.SenderName = a.senderName(ctx, sender)
	ictx, cancel := context.WithTimeout(ctx, ingestTimeout)
	defer cancel()
	res, err := a.engine.Ingest(ictx, in)
	if err != nil {
		return fmt.Errorf("feishu: ingest %s: %w", m.MessageID, err)
	}
	if in.NewThread {
		if err := a.setPendingNew(ctx, conv, false); err != nil {
			// The message is stored; at worst the next one starts yet another thread.
			a.log.Warn("feishu clearing /new failed", "conversation", conv.Ref(), "err", err)
		}
	}
	a.log.Debug("feishu message ingested", "message_id", m.MessageID, "thread", res.Thread, "duplicate", res.Duplicate, "dropped", res.Dropped)
	return nil
}

// botMentionText is what the app's own bot mention becomes in the stored text:
// "@handle", or nothing for a "*" account (its mention means the default bot).
func (a *Adapter) botMentionText() string {
	if a.bot == "*" {
		return ""
	}
	return "@" + a.bot
}

// textMentionsBot reports whether text names a configured bot as "@handle".
func (a *Adapter) textMentionsBot(text string) bool {
	for _, b := range a.roster() {
		h := b.Handle
		for i := 0; ; {
			j := strings.Index(text[i:], "@"+h)
			if j < 0 {
				break
			}
			j += i
			end := j + 1 + len(h)
			before := j == 0 || !isWordByte(text[j-1])
			after := end == len(text) || !isWordByte(text[end])
			if before && after {
				return true
			}
			i = end
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// msTime parses a millisecond timestamp string; zero on failure.
func msTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// placeholderRe matches a mention placeholder as a whole: "@_user_10" is never read
// as "@_user_1" followed by "0".
var placeholderRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`@_user_[0-9]+|@_all`) })

// replaceMentions replaces each placeholder by its mention: the app's own bot by
// botText ("" drops it together with one following space), other people by
// "@Name", "@_all" by "@all". Unknown placeholders are left as they are.
func replaceMentions(s string, mentions []mention, botOpenID, botText string) string {
	by := map[string]mention{}
	for _, m := range mentions {
		by[m.Key] = m
	}
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRe().FindAllStringIndex(s, -1) {
		key := s[loc[0]:loc[1]]
		b.WriteString(s[last:loc[0]])
		last = loc[1]
		m, ok := by[key]
		switch {
		case key == "@_all":
			b.WriteString("@all")
		case !ok:
			b.WriteString(key)
		case m.ID.OpenID == botOpenID:
			b.WriteString(botText)
			if botText == "" && last < len(s) && s[last] == ' ' {
				last++
			}
		default:
			b.WriteString("@" + m.Name)
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// messageText returns the plain text of a message's content (text and post types;
// https://open.feishu.cn/document/server-docs/im-v1/message-content-description/message_content)
// with mentions replaced, or ok=false for other message types.
func messageText(msgType, content string, mentions []mention, botOpenID, botText string) (text string, ok bool) {
	switch msgType {
	case "text":
		var c struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			return "", false
		}
		return strings.TrimSpace(replaceMentions(c.Text, mentions, botOpenID, botText)), true
	case "post":
		s, ok := postText(content)
		if !ok {
			return "", false
		}
		return strings.TrimSpace(replaceMentions(s, mentions, botOpenID, botText)), true
	}
	return "", false
}

type postBody struct {
	Title   string          `json:"title"`
	Content [][]postElement `json:"content"`
}

type postElement struct {
	Tag      string `json:"tag"`
	Text     string `json:"text"`
	Href     string `json:"href"`
	UserID   string `json:"user_id"`
	UserName string `json:"user_name"`
	Language string `json:"language"`
	Emoji    string `json:"emoji_type"`
}

// postText flattens rich text: the title, then one line per paragraph; links become
// Markdown links, @ elements keep their placeholder (replaced later) or name, code
// blocks are fenced, images and media become "[image]" / "[media]". Received posts
// are {"title","content"}; sent ones may be wrapped in a locale ("zh_cn", "en_us").
func postText(content string) (string, bool) {
	var p postBody
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return "", false
	}
	if p.Content == nil {
		var byLocale map[string]postBody
		if err := json.Unmarshal([]byte(content), &byLocale); err != nil {
			return "", false
		}
		for _, loc := range []string{"zh_cn", "en_us", "ja_jp"} {
			if v, ok := byLocale[loc]; ok {
				p = v
				break
			}
		}
		if p.Content == nil {
			for _, v := range byLocale {
				p = v
				break
			}
		}
	}
	var lines []string
	if p.Title != "" {
		lines = append(lines, p.Title)
	}
	for _, para := range p.Content {
		var b strings.Builder
		for _, e := range para {
			switch e.Tag {
			case "text", "md":
				b.WriteString(e.Text)
			case "a":
				fmt.Fprintf(&b, "[%s](%s)", e.Text, e.Href)
			case "at":
				if strings.HasPrefix(e.UserID, "@_") {
					b.WriteString(e.UserID)
				} else if e.UserName != "" {
					b.WriteString("@" + e.UserName)
				}
			case "code_block":
				fmt.Fprintf(&b, "```%s\n%s\n```", e.Language, strings.TrimRight(e.Text, "\n"))
			case "emotion":
				b.WriteString(":" + e.Emoji + ":")
			case "hr":
				b.WriteString("---")
			case "img":
				b.WriteString("[image]")
			case "media":
				b.WriteString("[media]")
			}
		}
		lines = append(lines, b.String())
	}
	return strings.Join(lines, "\n"), true
}

// handlePeopleCommand answers /pair, /people and /revoke (core.Commander) with a
// notice replying to the command; in a group only "@Bot /pair ..." reaches here.
func (a *Adapter) handlePeopleCommand(ctx context.Context, actor core.ActorID, chat, messageID, threadKey string, p2p bool, name, args string) error {
	inThread := !p2p
	c, ok := a.engine.(core.Commander)
	if !ok {
		a.queueNotice(messageID, "That command is not available here.", inThread)
		return nil
	}
	reply, err := c.Command(ctx, core.Command{Name: name, Args: args, Actor: actor, Account: a.account, Conversation: Conversation{Chat: chat}.Ref(), Direct: p2p, ThreadKey: threadKey})
	if err != nil {
		return fmt.Errorf("feishu: /%s: %w", name, err)
	}
	a.log.Info("feishu people command", "command", name, "open_id", actor)
	a.queueNotice(messageID, reply, inThread)
	return nil
}
