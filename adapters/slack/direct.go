package slack

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// directTimeout bounds one conversations.open call. It is short because
// /handoff is answered while the platform waits for the event's answer (3 s).
const directTimeout = 2 * time.Second

var _ core.DirectOpener = (*Adapter)(nil)

// DirectConversation implements core.DirectOpener (/handoff slack):
// conversations.open (scope im:write) returns the DM channel between this
// app's bot user and the person, opening it when there is none; the person
// must be in this app's workspace and not a bot. The thread key is the DM's own
// ("slack:<team>:<dm channel>", the conversation its top-level messages
// continue), so the person's next DM goes on with the handed-off thread.
func (a *Adapter) DirectConversation(ctx context.Context, actor core.ActorID, _ string) (core.ConversationRef, string, error) {
	team, user, ok := parseHumanActor(actor)
	if !ok {
		return "", "", fmt.Errorf("slack: %q is not a Slack user", actor)
	}
	id, err := a.identity(ctx)
	if err != nil {
		return "", "", err
	}
	if team != id.Team {
		return "", "", fmt.Errorf("slack: %s is not in workspace %s of this app", actor, id.Team)
	}
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	ch, _, _, err := a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		return "", "", fmt.Errorf("slack: conversations.open with %s: %w", user, err)
	}
	if ch == nil || ch.ID == "" {
		return "", "", fmt.Errorf("slack: conversations.open with %s answered no channel", user)
	}
	return Conversation{Team: team, Channel: ch.ID}.Ref(), ThreadKey(team, ch.ID, "", "", true), nil
}

// parseHumanActor splits an ActorID built by HumanActor into team and user.
func parseHumanActor(actor core.ActorID) (team, user string, ok bool) {
	rest, ok := strings.CutPrefix(string(actor), "slack:")
	if !ok {
		return "", "", false
	}
	team, user, ok = strings.Cut(rest, ":")
	return team, user, ok && team != "" && user != "" && !strings.Contains(user, ":")
}
