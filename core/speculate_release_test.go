package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"openbot/core"
	"openbot/store/bolt"
)

// releaseProbe is the bolt store; at each release of message reservations it
// notes whether the "hello" message is committed yet held back from the
// readers that follow message IDs (MessagesSince).
type releaseProbe struct {
	*bolt.Store
	mu   sync.Mutex
	held []bool
}

func (p *releaseProbe) ReleaseIDs(k core.IDKind, ids ...uint64) int {
	if k == core.IDMessage {
		var stored, readable bool
		_ = p.Store.View(context.Background(), func(tx core.ReadTx) error {
			if th, err := tx.ThreadByKey("console:spec"); err == nil {
				ms, _ := tx.Messages(th, 0, 0)
				stored = slices.ContainsFunc(ms, func(m core.Message) bool { return m.Text == "hello" })
			}
			ms, _ := tx.MessagesSince(0, 0)
			readable = slices.ContainsFunc(ms, func(m core.Message) bool { return m.Text == "hello" })
			return nil
		})
		p.mu.Lock()
		p.held = append(p.held, stored && !readable)
		p.mu.Unlock()
	}
	return p.Store.ReleaseIDs(k, ids...)
}

// When a speculation misses, its ingest's transaction runs again and commits
// the message above the speculation's reserved message ID, which is released
// only after that commit: until then the message is stored but held back from
// the console's stream and the message index, so the release (not the commit)
// is what makes it readable, and must wake them (admin.Notify).
func TestMissedSpeculationReleasesAfterItsMessageCommitted(t *testing.T) {
	p := &releaseProbe{}
	r := newSpecRig(t, func(o *core.Options) {
		p.Store = o.Store.(*bolt.Store)
		o.Store = p
	})
	r.ingestMissed(t, func(tx core.Tx) error {
		return tx.SetCursor(core.PausedCursor("chief_of_staff"), "{}")
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.held, true) {
		t.Fatalf("no release found the message stored and held back (%v)", p.held)
	}
}
