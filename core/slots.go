package core

import (
	"context"
	"sync"
)

// slots is the scheduler's global run-slot semaphore (Limits.MaxConcurrentRuns),
// whose size Reload may change. Safe for concurrent use.
type slots struct {
	mu      sync.Mutex
	n, max  int
	changed chan struct{} // closed and replaced on every release or resize
}

func newSlots(n int) *slots { return &slots{max: n, changed: make(chan struct{})} }

// acquire takes a slot, waiting until one is free; false when ctx ended first.
func (s *slots) acquire(ctx context.Context) bool {
	for {
		s.mu.Lock()
		if s.n < s.max {
			s.n++
			s.mu.Unlock()
			return true
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// tryAcquire takes a slot if one is free now, without waiting.
func (s *slots) tryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n < s.max {
		s.n++
		return true
	}
	return false
}

func (s *slots) release() {
	s.mu.Lock()
	s.n--
	s.broadcastLocked()
	s.mu.Unlock()
}

func (s *slots) resize(n int) {
	s.mu.Lock()
	s.max = n
	s.broadcastLocked()
	s.mu.Unlock()
}

func (s *slots) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
