package admin

import (
	"context"
	"sync"

	"openbot/core"
)

// Notifier is the wake-up hint of event streams: Poke after a commit wakes every
// stream waiting on the channel Wait returned before it. A hint carries nothing;
// the streams read what is new from the store, so a missed or extra hint costs
// at most one tick of delay or one empty read. The zero value is not usable; use
// NewNotifier.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNotifier returns a Notifier with nobody waiting.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// Wait returns a channel closed at the next Poke. Take it before reading the
// store, so a commit between the read and the wait is not missed.
func (n *Notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Poke wakes every current waiter. It never blocks.
func (n *Notifier) Poke() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// Notify wraps st so that every successful Update and Batch pokes n: the engine
// commits every message, run step, question and activity line through them, so
// event streams wake as soon as there is something to read. Reads, Close and
// errors pass through unchanged.
func Notify(st core.Store, n *Notifier) core.Store { return notifyStore{st, n} }

type notifyStore struct {
	core.Store
	n *Notifier
}

func (s notifyStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.n.Poke()
	}
	return err
}

func (s notifyStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	err := s.Store.Batch(ctx, fn)
	if err == nil {
		s.n.Poke()
	}
	return err
}
