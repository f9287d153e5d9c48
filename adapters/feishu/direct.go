package feishu

import (
	"context"
	"fmt"
	"strings"
	"time"

	"openbot/core"
)

// directTimeout bounds the message DirectConversation sends. It is short because
// /handoff is answered while the platform waits for the event's answer (3 s).
const directTimeout = 2 * time.Second

var _ core.DirectOpener = (*Adapter)(nil)

// DirectConversation implements core.DirectOpener (/handoff feishu). Feishu
// names a person's chat with the app only in the answer to a message sent to
// them by open_id (receive_id_type=open_id; Feishu opens the chat when there is
// none, for anyone the app is available to), so it sends hello there and
// returns that p2p chat. The thread key is the chat's dialog key
// (DialogKey, "feishu:<chat>"), so the person's next message there continues
// the handed-off thread.
func (a *Adapter) DirectConversation(ctx context.Context, actor core.ActorID, hello string) (core.ConversationRef, string, error) {
	openID, ok := strings.CutPrefix(string(actor), "feishu:")
	if !ok || !strings.HasPrefix(openID, "ou_") {
		return "", "", fmt.Errorf("feishu: %q is not a Feishu user", actor)
	}
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	m, err := a.api.createMessage(ctx, "open_id", openID, "text", textContent(hello), "")
	if err != nil {
		return "", "", fmt.Errorf("feishu: message to %s: %w", openID, err)
	}
	if m.ChatID == "" {
		return "", "", fmt.Errorf("feishu: the message to %s came back without its chat", openID)
	}
	return Conversation{Chat: m.ChatID}.Ref(), DialogKey(m.ChatID), nil
}
