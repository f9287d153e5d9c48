package slack

import (
	"context"
	"errors"
	"strings"
	"sync"

	"openbot/core"
)

// State is the little the adapter keeps in, or reads from, openbot's store: a
// pending /new per DM (so it survives a restart) and who posted the message a
// Slack thread hangs under (so a reply in the thread of a bot's top-level message
// joins that bot's thread). cmd passes StoreState(engine store); without it (tests
// of the adapter alone) a pending /new lives in memory and replies to bot messages
// are not recognized. Methods are safe for concurrent use and honour ctx.
type State interface {
	// Cursor returns a persisted value, "" when unset; SetCursor stores one ("" clears).
	core.Cursors
	// BotParent reports whether the message stored or delivered under parentKey (a
	// DedupKey) was posted by a bot or the system, provided no openbot thread is
	// bound to threadKey yet, and which actor posted it (core.SystemActor for a
	// notice). ok is false for a human's message, an unknown message, and a Slack
	// thread openbot already follows.
	BotParent(ctx context.Context, threadKey, parentKey string) (who core.ActorID, ok bool, err error)
}

// StoreState implements State on a core.Store, each call one short transaction;
// the cursors are core.StoreCursors.
func StoreState(s core.Store) State { return storeState{core.StoreCursors(s), s} }

type storeState struct {
	core.Cursors
	s core.Store
}

func (c storeState) BotParent(ctx context.Context, threadKey, parentKey string) (who core.ActorID, ok bool, err error) {
	err = c.s.View(ctx, func(tx core.ReadTx) error {
		if _, err := tx.ThreadByKey(threadKey); err == nil {
			return nil // a Slack thread openbot already follows keeps its thread
		} else if !errors.Is(err, core.ErrNotFound) {
			return err
		}
		mid, err := tx.Seen(parentKey)
		if errors.Is(err, core.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		m, err := tx.Message(mid)
		if errors.Is(err, core.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if strings.HasPrefix(string(m.Sender), "bot:") || m.Sender == core.SystemActor {
			who, ok = m.Sender, true
		}
		return nil
	})
	return who, ok, err
}

// memState is the State used without a store: cursors in memory, no lookups.
type memState struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memState) Cursor(_ context.Context, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name], nil
}

func (s *memState) SetCursor(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	if value == "" {
		delete(s.m, name)
	} else {
		s.m[name] = value
	}
	return nil
}

func (s *memState) BotParent(context.Context, string, string) (core.ActorID, bool, error) {
	return "", false, nil
}
