// Package lru is a small bounded cache for per-conversation state that must not
// grow with the number of conversations ever seen (memory flat under bursts,
// DESIGN.md §9): at most Max entries, the least recently used forgotten first, and
// entries untouched for TTL dropped when next looked at or swept.
package lru

import (
	"container/list"
	"sync"
	"time"
)

// Cache maps K to V with at most max entries. Safe for concurrent use. The zero
// value is not usable; call New.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // front = most recently used; values are *entry[K, V]
	byKey map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	when time.Time // last Put
}

// New returns a cache of at most size entries (at least 1); an entry older than
// ttl since its last Put is treated as absent (ttl <= 0: entries never expire).
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	return &Cache[K, V]{max: max(1, size), ttl: ttl, order: list.New(), byKey: map[K]*list.Element{}}
}

// Get returns the value under k and marks it most recently used; false when
// there is none or it expired at now (then it is removed).
func (c *Cache[K, V]) Get(k K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.byKey[k]
	if !ok {
		return zero, false
	}
	e := el.Value.(*entry[K, V])
	if c.expired(e, now) {
		c.remove(el)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

// Put stores v under k at now, evicting the least recently used entry when the
// cache is full.
func (c *Cache[K, V]) Put(k K, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		e := el.Value.(*entry[K, V])
		e.val, e.when = v, now
		c.order.MoveToFront(el)
		return
	}
	c.byKey[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, when: now})
	for c.order.Len() > c.max {
		c.remove(c.order.Back())
	}
}

// Delete removes k, if present.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.remove(el)
	}
}

// Sweep removes every entry expired at now and returns how many it removed.
func (c *Cache[K, V]) Sweep(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for el := c.order.Back(); el != nil; {
		prev := el.Prev()
		if c.expired(el.Value.(*entry[K, V]), now) {
			c.remove(el)
			n++
		}
		el = prev
	}
	return n
}

// Len is the number of entries held, expired ones not yet removed included.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache[K, V]) expired(e *entry[K, V], now time.Time) bool {
	return c.ttl > 0 && now.Sub(e.when) > c.ttl
}

func (c *Cache[K, V]) remove(el *list.Element) {
	c.order.Remove(el)
	delete(c.byKey, el.Value.(*entry[K, V]).key)
}
