package agents

import (
	"fmt"
	"testing"
	"time"
)

// TestCooldowns: an entry lasts its time (a longer one is not shortened), a
// cleared one ends at once, and the table never holds more than
// maxCooldownEntries: the entry ending soonest gives way.
func TestCooldowns(t *testing.T) {
	clock := &setClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	c := NewCooldowns(clock)
	c.set("a", time.Minute, "HTTP 429")
	c.set("a", time.Second, "HTTP 500")
	if d, why := c.left("a"); d != time.Minute || why != "HTTP 429" {
		t.Errorf("left = %s %q", d, why)
	}
	clock.set(clock.Now().Add(time.Minute))
	if d, _ := c.left("a"); d != 0 {
		t.Errorf("after its time: left %s", d)
	}
	c.set("b", time.Hour, "x")
	c.clear("b")
	if d, _ := c.left("b"); d != 0 {
		t.Errorf("cleared: left %s", d)
	}
	for i := range maxCooldownEntries + 10 {
		c.set(fmt.Sprint("k", i), time.Duration(i+1)*time.Second, "x")
	}
	c.mu.Lock()
	n := len(c.until)
	c.mu.Unlock()
	if n > maxCooldownEntries {
		t.Errorf("%d entries, want at most %d", n, maxCooldownEntries)
	}
	if d, _ := c.left("k0"); d != 0 {
		t.Errorf("the soonest entry stayed: %s", d)
	}
	if d, _ := c.left(fmt.Sprint("k", maxCooldownEntries+9)); d == 0 {
		t.Error("the newest entry is gone")
	}
}

// TestKeyringSkipsCoolingKeys: keys rotate; one cooling down is skipped while
// another is free, and when all cool the one back first is offered, not fresh.
func TestKeyringSkipsCoolingKeys(t *testing.T) {
	clock := &setClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	k := newKeyring("p", []APIKey{{"a", "ka"}, {"b", "kb"}, {"c", "kc"}}, NewCooldowns(clock))
	var got []string
	for range 3 {
		i, fresh := k.pick(nil)
		if !fresh {
			t.Fatal("not fresh")
		}
		got = append(got, k.keys[i].Label)
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Errorf("rotation = %v", got)
	}
	k.cd.set(k.ids[0], time.Minute, "HTTP 401")
	k.cd.set(k.ids[1], 2*time.Minute, "HTTP 429")
	for range 3 {
		if i, fresh := k.pick(nil); !fresh || k.keys[i].Label != "c" {
			t.Errorf("pick = %s %v, want c", k.keys[i].Label, fresh)
		}
	}
	k.cd.set(k.ids[2], 3*time.Minute, "HTTP 429")
	if i, fresh := k.pick(nil); fresh || k.keys[i].Label != "a" {
		t.Errorf("all cooling: pick = %s %v, want a, not fresh", k.keys[i].Label, fresh)
	}
	if d, why := k.cooling(); d != time.Minute || why != "HTTP 401" {
		t.Errorf("cooling = %s %q", d, why)
	}
}
