// Package ingress is the readiness every chat adapter reports for its account's
// ingress (DESIGN.md §9, the /healthz readiness check): live once it first takes
// messages, and down, with a reason, while it has lost its connection since.
package ingress

import (
	"sync"
	"sync/atomic"
)

// State is one account's ingress. The zero value is neither live nor down; it
// is safe for concurrent use.
type State struct {
	make, close sync.Once
	live        chan struct{}
	down        atomic.Pointer[string]
}

func (s *State) ch() chan struct{} {
	s.make.Do(func() { s.live = make(chan struct{}) })
	return s.live
}

// Ready returns a channel closed by MarkLive.
func (s *State) Ready() <-chan struct{} { return s.ch() }

// MarkLive closes the Ready channel; later calls do nothing.
func (s *State) MarkLive() {
	ch := s.ch()
	s.close.Do(func() { close(ch) })
}

// Down says why the ingress does not take messages now, or "" when it does.
func (s *State) Down() string {
	if p := s.down.Load(); p != nil {
		return *p
	}
	return ""
}

// SetDown records why the ingress is down; "" marks it up again.
func (s *State) SetDown(why string) {
	if why == "" {
		s.down.Store(nil)
		return
	}
	s.down.Store(&why)
}
