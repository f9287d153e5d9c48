package slack

import (
	"testing"
	"time"
)

func TestUserCacheBoundedWithTTL(t *testing.T) {
	c := newUserCache(2, time.Hour)
	now := time.Unix(1000, 0)
	c.put("U1", cachedUser{name: "one"}, now)
	c.put("U2", cachedUser{name: "two"}, now)
	if _, ok := c.get("U1", now); !ok { // U1 becomes most recent
		t.Fatal("U1 missing")
	}
	c.put("U3", cachedUser{name: "three"}, now)
	if c.len() != 2 {
		t.Errorf("len %d, want 2", c.len())
	}
	if _, ok := c.get("U2", now); ok {
		t.Error("least recently used U2 kept")
	}
	if u, ok := c.get("U1", now.Add(59*time.Minute)); !ok || u.name != "one" {
		t.Errorf("U1 = %v %v", u, ok)
	}
	if _, ok := c.get("U1", now.Add(61*time.Minute)); ok {
		t.Error("expired entry returned")
	}
}

func TestProgressMapBounded(t *testing.T) {
	p := newProgressMap(2)
	p.set(1, progress{posted: 1})
	p.set(2, progress{posted: 2})
	p.set(3, progress{posted: 3})
	if got := p.get(1); got.posted != 0 {
		t.Errorf("oldest entry kept: %+v", got)
	}
	p.done(2)
	if got := p.get(2); got.posted != 0 {
		t.Errorf("done entry kept: %+v", got)
	}
	if got := p.get(3); got.posted != 3 {
		t.Errorf("entry 3 = %+v", got)
	}
}

// len is the number of users cached.
func (c *userCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
