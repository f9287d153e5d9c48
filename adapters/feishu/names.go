package feishu

import (
	"context"
	"time"
)

// Sender names are looked up once per user and cached in a bounded LRU (at most
// maxNames users, the least recently seen forgotten first; memory flat under
// bursts, DESIGN.md §9); a failed lookup (no contact permission, unknown user) is
// cached too, so the ingest path pays for it at most once per nameTTL.
const (
	nameTTL        = 6 * time.Hour
	nameLookupWait = 700 * time.Millisecond
	maxNames       = 4096
)

// senderName returns the display name of openID, or openID itself when the
// contact API does not tell. It waits at most nameLookupWait.
func (a *Adapter) senderName(ctx context.Context, openID string) string {
	now := a.clock.Now()
	name, ok := a.names.Get(openID, now)
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, nameLookupWait)
		var err error
		name, err = a.api.userName(ctx, openID)
		cancel()
		if err != nil {
			a.log.Debug("feishu user name lookup failed; using the open_id", "open_id", openID, "err", err)
		}
		a.names.Put(openID, name, now)
	}
	if name == "" {
		return openID
	}
	return name
}
