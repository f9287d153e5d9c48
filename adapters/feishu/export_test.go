package feishu

import "context"

// Test hooks into the bounded per-conversation state (memory flat under bursts).
const (
	MaxNames = maxNames
	MaxFresh = maxFresh
)

func SenderName(a *Adapter, ctx context.Context, openID string) string {
	return a.senderName(ctx, openID)
}

// PutName caches a name as a lookup would.
func PutName(a *Adapter, openID, name string) { a.names.Put(openID, name, a.clock.Now()) }

func CachedName(a *Adapter, openID string) bool {
	_, ok := a.names.Get(openID, a.clock.Now())
	return ok
}

func NamesLen(a *Adapter) int { return a.names.Len() }
func FreshLen(a *Adapter) int { return a.fresh.Len() }

func SetPendingNew(a *Adapter, ctx context.Context, chat string, on bool) error {
	return a.setPendingNew(ctx, Conversation{Chat: chat}, on)
}

func PendingNew(a *Adapter, ctx context.Context, chat string) bool {
	on, _ := a.pendingNew(ctx, Conversation{Chat: chat})
	return on
}
