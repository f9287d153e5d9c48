package lru

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestBounded: the cache never holds more than max entries and forgets the least
// recently used first.
func TestBounded(t *testing.T) {
	c := New[int, string](3, 0)
	for i := range 10 {
		c.Put(i, "v", t0)
		if i == 7 {
			c.Get(7, t0) // 7 stays most recent
		}
	}
	if c.Len() != 3 {
		t.Fatalf("Len %d, want 3", c.Len())
	}
	for _, k := range []int{7, 8, 9} {
		if _, ok := c.Get(k, t0); !ok {
			t.Errorf("%d evicted, want kept", k)
		}
	}
	c.Get(7, t0)
	c.Put(10, "v", t0) // evicts 8, the least recently used
	if _, ok := c.Get(8, t0); ok {
		t.Error("8 kept, want evicted")
	}
	if _, ok := c.Get(7, t0); !ok {
		t.Error("7 evicted, want kept (recently used)")
	}
}

// TestExpiry: an entry older than the TTL reads as absent and Sweep removes it.
func TestExpiry(t *testing.T) {
	c := New[string, bool](10, time.Minute)
	c.Put("a", true, t0)
	c.Put("b", true, t0.Add(50*time.Second))
	if _, ok := c.Get("a", t0.Add(59*time.Second)); !ok {
		t.Fatal("a expired early")
	}
	if n := c.Sweep(t0.Add(61 * time.Second)); n != 1 {
		t.Fatalf("Sweep removed %d, want 1", n)
	}
	if c.Len() != 1 {
		t.Fatalf("Len %d, want 1", c.Len())
	}
	if _, ok := c.Get("b", t0.Add(2*time.Minute)); ok {
		t.Fatal("b read after its TTL")
	}
	if c.Len() != 0 {
		t.Fatalf("Len %d after expired Get, want 0", c.Len())
	}
	c.Put("c", true, t0)
	c.Delete("c")
	if c.Len() != 0 {
		t.Fatal("Delete kept the entry")
	}
}
