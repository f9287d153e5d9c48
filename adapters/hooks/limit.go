package hooks

import (
	"sync"
	"time"
)

// limiter is a trigger's rate limit (a bucket of n runs refilled evenly over
// per) and daily budget (runs a UTC day), in memory.
type limiter struct {
	mu     sync.Mutex
	n      int
	per    time.Duration
	tokens float64
	last   time.Time
	daily  int
	day    string
	used   int
}

func newLimiter(n int, per time.Duration, daily int) *limiter {
	return &limiter{n: n, per: per, tokens: float64(n), daily: daily}
}

// take reports whether one more run may start now, and counts it.
func (l *limiter) take(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := now.UTC().Format(time.DateOnly); d != l.day {
		l.day, l.used = d, 0
	}
	if l.daily > 0 && l.used >= l.daily {
		return false
	}
	if l.n > 0 && l.per > 0 {
		if !l.last.IsZero() && now.After(l.last) {
			l.tokens = min(float64(l.n), l.tokens+float64(l.n)*float64(now.Sub(l.last))/float64(l.per))
		}
		l.last = now
		if l.tokens < 1 {
			return false
		}
		l.tokens--
	}
	l.used++
	return true
}

// refund gives back a run take counted that did not start (a redelivery, a
// failed store).
func (l *limiter) refund() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 && l.per > 0 {
		l.tokens = min(float64(l.n), l.tokens+1)
	}
	l.used = max(0, l.used-1)
}
