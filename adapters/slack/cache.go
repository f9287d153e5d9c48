package slack

import (
	"container/list"
	"sync"
	"time"
)

// cachedUser is what users.info told us about a user.
type cachedUser struct {
	name  string   // best display name
	names []string // every non-empty name, best first
	isBot bool
}

// userCache is a bounded LRU of users with a time to live, so names are looked up
// once per hour at most and memory stays bounded. Safe for concurrent use.
type userCache struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // front = most recent; values are *userEntry
	byID  map[string]*list.Element
}

type userEntry struct {
	id   string
	u    cachedUser
	when time.Time
}

func newUserCache(max int, ttl time.Duration) *userCache {
	return &userCache{max: max, ttl: ttl, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *userCache) get(id string, now time.Time) (cachedUser, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return cachedUser{}, false
	}
	e := el.Value.(*userEntry)
	if now.Sub(e.when) > c.ttl {
		c.order.Remove(el)
		delete(c.byID, id)
		return cachedUser{}, false
	}
	c.order.MoveToFront(el)
	return e.u, true
}

func (c *userCache) put(id string, u cachedUser, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		el.Value = &userEntry{id: id, u: u, when: now}
		c.order.MoveToFront(el)
		return
	}
	c.byID[id] = c.order.PushFront(&userEntry{id: id, u: u, when: now})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byID, last.Value.(*userEntry).id)
	}
}

// progressMap remembers, per outbox entry, the chunks of a split reply already
// posted, so a retried Deliver (after a 429 on chunk 3) does not post chunks 1 and 2
// again. Bounded: the oldest entries are forgotten first. Safe for concurrent use.
type progressMap struct {
	mu    sync.Mutex
	max   int
	order []uint64
	m     map[uint64]progress
}

type progress struct {
	posted  int    // chunks already posted
	firstTS string // ts of the first chunk, the delivery's platform id
	n       int    // total chunks, to notice a changed text
}

func newProgressMap(max int) *progressMap {
	return &progressMap{max: max, m: map[uint64]progress{}}
}

func (p *progressMap) get(id uint64) progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[id]
}

func (p *progressMap) set(id uint64, pr progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[id]; !ok {
		p.order = append(p.order, id)
		for len(p.order) > p.max {
			delete(p.m, p.order[0])
			p.order = p.order[1:]
		}
	}
	p.m[id] = pr
}

func (p *progressMap) done(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[id]; !ok {
		return
	}
	delete(p.m, id)
	for i, x := range p.order {
		if x == id {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
}
