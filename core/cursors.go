package core

import (
	"context"
	"errors"
)

// Cursors persists small adapter positions and flags durably, one Store
// transaction per call (DESIGN.md §8: adapters resume from persisted cursors): a
// Telegram polling offset, a pending "/new" in a conversation. Cursor returns ""
// for a name never set. Both honour ctx. Adapters take it as an option, so they
// never import the store.
type Cursors interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// StoreCursors adapts a Store's Cursor/SetCursor to Cursors.
func StoreCursors(s Store) Cursors { return storeCursors{s} }

type storeCursors struct{ s Store }

func (c storeCursors) Cursor(ctx context.Context, name string) (string, error) {
	var v string
	err := c.s.View(ctx, func(tx ReadTx) error {
		var err error
		v, err = tx.Cursor(name)
		if errors.Is(err, ErrNotFound) {
			v, err = "", nil
		}
		return err
	})
	return v, err
}

func (c storeCursors) SetCursor(ctx context.Context, name, value string) error {
	return c.s.Update(ctx, func(tx Tx) error { return tx.SetCursor(name, value) })
}

// Flag reads a yes/no cursor, such as an adapter's pending /new: set is "1",
// cleared is empty (SetFlag).
func Flag(ctx context.Context, c Cursors, name string) (bool, error) {
	v, err := c.Cursor(ctx, name)
	return v != "", err
}

// SetFlag sets (on) or clears a yes/no cursor (Flag).
func SetFlag(ctx context.Context, c Cursors, name string, on bool) error {
	v := ""
	if on {
		v = "1"
	}
	return c.SetCursor(ctx, name, v)
}
