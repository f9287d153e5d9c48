package feishu

import (
	"context"
	"strings"
	"time"

	"openbot/core"
)

// Chat commands (DESIGN.md §3, the same small set as Telegram's): "/new" starts a
// new conversation, "/help" lists the team, "/stop" stops the bots' work in the
// thread (DESIGN.md §10, stop.go), "/usage" shows spend and budgets. In a p2p chat every message may be a
// command; in a group only one that mentions this app's bot ("@Bot /new").

// command reports whether text is the command cmd ("/new" or "/new rest") and
// returns the rest.
func command(text, cmd string) (string, bool) {
	if text == cmd {
		return "", true
	}
	if strings.HasPrefix(text, cmd+" ") || strings.HasPrefix(text, cmd+"\n") {
		return strings.TrimSpace(text[len(cmd):]), true
	}
	return "", false
}

// Without a Cursors store a pending /new lives in memory: at most maxFresh
// conversations (the least recently marked forgotten first), each for at most
// freshTTL (memory flat under bursts, DESIGN.md §9).
const (
	maxFresh = 4096
	freshTTL = 24 * time.Hour
)

// pendingNewName is the cursor that remembers a bare /new in a conversation:
// "feishu/<name>/new/<conversation ref>".
func (a *Adapter) pendingNewName(conv Conversation) string {
	return "feishu/" + a.name + "/new/" + string(conv.Ref())
}

// pendingNew reports whether a bare /new waits for the next message in conv.
func (a *Adapter) pendingNew(ctx context.Context, conv Conversation) (bool, error) {
	if a.cursors == nil {
		on, _ := a.fresh.Get(conv.Ref(), a.clock.Now())
		return on, nil
	}
	return core.Flag(ctx, a.cursors, a.pendingNewName(conv))
}

// setPendingNew sets or clears the pending /new of conv, durably when the adapter
// has Cursors.
func (a *Adapter) setPendingNew(ctx context.Context, conv Conversation, on bool) error {
	if a.cursors == nil {
		if on {
			a.fresh.Put(conv.Ref(), true, a.clock.Now())
		} else {
			a.fresh.Delete(conv.Ref())
		}
		return nil
	}
	return core.SetFlag(ctx, a.cursors, a.pendingNewName(conv), on)
}

// helpText lists the team and the commands for /help.
func (a *Adapter) helpText(p2p bool) string {
	var b strings.Builder
	b.WriteString(core.TeamRoster(a.roster()))
	if p2p {
		b.WriteString("\nEvery message here is answered. Write @handle to ask a specific bot. " +
			"/new starts a new conversation; /stop stops the bots' work in it; /compact summarises its older part for the bots now; /help shows this.")
	} else {
		b.WriteString("\nIn a group, mention me to start a conversation; replies in its thread continue it. " +
			"Write @handle to ask a specific bot. Mention me with /new to start a new conversation in this thread, with /stop to stop the bots' work in it, with /compact to summarise its older part for the bots now; /help shows this.")
	}
	return b.String()
}
