package feishu

import (
	"context"
	"time"
)

// Sender names are looked up once per user and cached; a failed lookup (no contact
// permission, unknown user) is cached too, so the ingest path pays for it at most
// once per nameTTL.
const (
	nameTTL        = 6 * time.Hour
	nameLookupWait = 700 * time.Millisecond
	maxNames       = 4096
)

type nameEntry struct {
	name  string // "" when the lookup failed
	until time.Time
}

// senderName returns the display name of openID, or openID itself when the
// contact API does not tell. It waits at most nameLookupWait.
func (a *Adapter) senderName(ctx context.Context, openID string) string {
	now := a.clock.Now()
	a.mu.Lock()
	e, ok := a.names[openID]
	a.mu.Unlock()
	if !ok || now.After(e.until) {
		ctx, cancel := context.WithTimeout(ctx, nameLookupWait)
		name, err := a.api.userName(ctx, openID)
		cancel()
		if err != nil {
			a.log.Debug("feishu user name lookup failed; using the open_id", "open_id", openID, "err", err)
		}
		e = nameEntry{name: name, until: now.Add(nameTTL)}
		a.mu.Lock()
		if len(a.names) >= maxNames {
			clear(a.names)
		}
		a.names[openID] = e
		a.mu.Unlock()
	}
	if e.name == "" {
		return openID
	}
	return e.name
}
