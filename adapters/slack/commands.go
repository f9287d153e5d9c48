package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"openbot/core"
)

// Chat commands: the same small set as Telegram's. In a DM, which is otherwise one
// endless openbot thread (DESIGN.md §3), /new starts a new thread: "/new" alone
// makes the next DM message begin it (the flag is stored, so a restart keeps it),
// "/new TEXT" begins it with TEXT. It arrives as the registered slash command (a
// signed form POST to /slack/<name>/commands in http mode, a slash_commands
// envelope in Socket Mode) or as a DM whose whole text is "new" or "/new" (Slack
// delivers a message starting with "/" only when no slash command of that name is
// installed, so the plain word works whatever the manifest says). The confirmation
// is a private reply, never a model call.
const (
	replyNewPending = "Started a new conversation: your next message begins it."
	replyNewStarted = "Started a new conversation with your message."
	replyNewChannel = "In a channel every top-level message that mentions the app starts a new conversation, " +
		"and a reply in its Slack thread continues it; /new is for direct messages."
	replyUnknownCmd = "openbot knows /new (in a direct message it starts a new conversation), /stop (it stops the bots' work in the conversation), /usage (spend and budgets) and /pair CODE (an owner lets a person in)."
	replyNotAllowed = "Sorry, you are not allowed to talk to openbot here."
)

// commandReply is the body of a slash command's response (the HTTP answer or the
// Socket Mode ack payload); "ephemeral" shows it only to the person who typed it.
type commandReply struct {
	ResponseType string `json:"response_type,omitempty"`
	Text         string `json:"text"`
}

// handleCommand runs one slash command and returns the private reply, "" for a
// malformed command (refused with a WARN line). It returns an error only when
// storing failed (the pending /new or the message of "/new TEXT"), so the caller
// does not acknowledge and the person sees Slack's failure instead of a false
// confirmation.
func (a *Adapter) handleCommand(ctx context.Context, cmd slack.SlashCommand) (string, error) {
	if cmd.Command == "" || cmd.ChannelID == "" || cmd.UserID == "" {
		a.refuse("slash command without command, channel or user", "command", cmd.Command, "channel", cmd.ChannelID)
		return "", nil
	}
	if (a.allowCh != nil && !a.allowCh[cmd.ChannelID]) || (a.allowU != nil && !a.allowU[cmd.UserID]) {
		a.refuse("channel or user not on the allow list", "command", cmd.Command, "channel", cmd.ChannelID, "user", cmd.UserID)
		return replyNotAllowed, nil
	}
	if strings.EqualFold(cmd.Command, "/stop") {
		return a.stopCommandSlash(ctx, cmd)
	}
	if strings.EqualFold(cmd.Command, "/usage") {
		return a.usage(ctx, cmd), nil
	}
	if strings.EqualFold(cmd.Command, "/pair") {
		return a.pairSlash(ctx, cmd)
	}
	if !strings.EqualFold(cmd.Command, "/new") {
		a.refuse("unknown slash command", "command", cmd.Command)
		return replyUnknownCmd, nil
	}
	if !isDMChannel(cmd.ChannelID, "") {
		return replyNewChannel, nil
	}
	id, err := a.identity(ctx)
	if err != nil {
		return "", err
	}
	team := cmp.Or(cmd.TeamID, id.Team)
	ad, err := core.AdmitDM(ctx, a.engine, core.Admission{Account: a.Account(), Actor: HumanActor(team, cmd.UserID),
		Name: a.userName(ctx, cmd.UserID), Policy: a.dmPolicy, Listed: a.allowU[cmd.UserID]})
	if err != nil {
		return "", err
	}
	if !ad.Allow {
		a.refuse("/new refused by dm_policy "+a.dmPolicy, "channel", cmd.ChannelID, "user", cmd.UserID)
		return cmp.Or(ad.Reply, replyNotAllowed), nil
	}
	text, _, _ := a.normalize(ctx, cmd.Text, id.UserID)
	if text == "" {
		if err := a.setPendingNew(ctx, team, cmd.ChannelID, true); err != nil {
			return "", err
		}
		return replyNewPending, nil
	}
	// "/new TEXT": a slash command has no ts; its trigger_id names this use of it.
	in := a.dmInbound(ctx, team, cmd.ChannelID, cmd.UserID, text)
	in.DedupKey = DedupKey(team, cmd.ChannelID, "command:"+cmd.TriggerID)
	in.NewThread = true
	in.Received = a.clock.Now()
	if _, err := a.engine.Ingest(ctx, in); err != nil {
		return "", err
	}
	if err := a.setPendingNew(ctx, team, cmd.ChannelID, false); err != nil {
		return "", err
	}
	return replyNewStarted, nil
}

// dmInbound is a top-level DM message from user in channel, not yet keyed.
func (a *Adapter) dmInbound(ctx context.Context, team, channel, user, text string) core.Inbound {
	in := core.Inbound{
		Account:      a.Account(),
		Platform:     "slack",
		ThreadKey:    ThreadKey(team, channel, "", "", true),
		Conversation: ReplyConversation(team, channel, "", "", true).Ref(),
		SenderID:     HumanActor(team, user),
		SenderName:   a.userName(ctx, user),
		Text:         text,
		StartThread:  true,
	}
	if a.bot != "*" {
		in.DefaultBot = a.bot
	}
	return in
}

// newCommand reports whether a DM's normalized text is the plain-text /new: the
// whole text "new" or "/new" (any case), or "/new TEXT"; rest is TEXT.
func newCommand(text string) (rest string, ok bool) {
	t := strings.TrimSpace(text)
	if strings.EqualFold(t, "new") || strings.EqualFold(t, "/new") {
		return "", true
	}
	if len(t) > 5 && strings.EqualFold(t[:5], "/new ") {
		return strings.TrimSpace(t[5:]), true
	}
	return "", false
}

// pendingNewName is the cursor that remembers a bare /new in a DM.
func (a *Adapter) pendingNewName(team, channel string) string {
	return "slack/" + a.name + "/new/" + team + ":" + channel
}

// pendingNew reports whether a bare /new waits for the next message in a DM.
func (a *Adapter) pendingNew(ctx context.Context, team, channel string) (bool, error) {
	return core.Flag(ctx, a.state, a.pendingNewName(team, channel))
}

func (a *Adapter) setPendingNew(ctx context.Context, team, channel string, on bool) error {
	return core.SetFlag(ctx, a.state, a.pendingNewName(team, channel), on)
}

// confirm posts a short notice into a DM in the background (after the event is
// acknowledged); it is not stored, like Telegram's direct replies.
func (a *Adapter) confirm(ctx context.Context, channel, text string) {
	a.notify(ctx, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, noticeTimeout)
		defer cancel()
		opts := append([]slack.MsgOption{slack.MsgOptionText(text, false)}, a.senderOptions(core.Sender{Actor: core.SystemActor, Name: "system"})...)
		if _, _, err := a.api.PostMessageContext(ctx, channel, opts...); err != nil {
			a.log.Warn("slack confirmation failed", "channel", channel, "err", err)
			return
		}
		a.sent()
	})
}

// serveCommands handles slash commands in http mode: POST /slack/<name>/commands,
// a form signed like every Slack request (verified before anything is parsed).
// The answer, sent after the command's effect is stored, is the private reply;
// a storing failure answers 500 so Slack tells the person it failed.
func (a *Adapter) serveCommands(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readVerified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		a.refuse("slash command body is not a form", "path", r.URL.Path)
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	cmd := slack.SlashCommand{
		TeamID: form.Get("team_id"), ChannelID: form.Get("channel_id"), ChannelName: form.Get("channel_name"),
		UserID: form.Get("user_id"), UserName: form.Get("user_name"), Command: form.Get("command"),
		Text: form.Get("text"), TriggerID: form.Get("trigger_id"), APIAppID: form.Get("api_app_id"),
	}
	reply, err := a.handleCommand(r.Context(), cmd)
	if err != nil {
		a.log.Error("slack command not stored", "command", cmd.Command, "err", err)
		http.Error(w, "not stored", http.StatusInternalServerError)
		return
	}
	if reply == "" {
		http.Error(w, "malformed command", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(commandReply{ResponseType: "ephemeral", Text: reply})
}

// pairSlash handles the /pair slash command: an owner lets in the person a
// pairing code was given to (core.Commander); the reply is private.
func (a *Adapter) pairSlash(ctx context.Context, cmd slack.SlashCommand) (string, error) {
	name, args, ok := core.ParseCommand("/pair " + cmd.Text)
	if !ok {
		return "Usage: /pair CODE, with the 8-character code the person was given.", nil
	}
	c, ok := a.engine.(core.Commander)
	if !ok {
		return "That command is not available here.", nil
	}
	team := cmd.TeamID
	if team == "" {
		id, err := a.identity(ctx)
		if err != nil {
			return "", err
		}
		team = id.Team
	}
	return c.Command(ctx, core.Command{Name: name, Args: args, Actor: HumanActor(team, cmd.UserID),
		ActorName: a.userName(ctx, cmd.UserID), Account: a.Account()})
}
