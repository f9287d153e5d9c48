package agents

import (
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"openbot/core"
)

// Cooldown lengths when the server names none (Retry-After honoured otherwise,
// up to maxCooldown).
const (
	// busyCooldown follows a 429, a 5xx, a timeout or a connection failure.
	busyCooldown = 15 * time.Second
	// missingCooldown follows a 404 (the model or the path does not exist)
	// and a profile's refused key (401, 403), which seconds do not change:
	// longer than a call waits for a profile (retryMaxWait), so a bot with no
	// other profile hears so at once, and short enough that a fix outside
	// openbot (a key re-enabled) is seen soon.
	missingCooldown = 2 * time.Minute
	// refusedCooldown sets aside one of several keys the server refused
	// (401, 403): the others serve meanwhile.
	refusedCooldown = 10 * time.Minute
	// maxCooldown caps a server's Retry-After.
	maxCooldown = time.Hour
	// maxCooldownEntries bounds the entries a Cooldowns keeps; past it the
	// entry ending soonest is dropped.
	maxCooldownEntries = 1024
)

// Cooldowns remembers, for one process, which llm profiles and API keys failed
// and until when calls skip them (fallback chains, key rotation). One value is
// shared by every Agent of the process (Options.Cooldowns), so a reload keeps
// it; an entry is keyed by what it judges (a profile's name and base URL, a
// key's label and a hash of its value), so a profile or key changed by a
// reload starts afresh. At most maxCooldownEntries entries. Safe for
// concurrent use.
type Cooldowns struct {
	clock core.Clock
	mu    sync.Mutex
	until map[string]cooldown
}

// cooldown is one entry: until when, and why in words for people and logs
// ("HTTP 429", "could not be reached").
type cooldown struct {
	until time.Time
	why   string
}

// NewCooldowns returns an empty Cooldowns on clock (nil: the system clock).
func NewCooldowns(clock core.Clock) *Cooldowns {
	if clock == nil {
		clock = systemClock{}
	}
	return &Cooldowns{clock: clock, until: map[string]cooldown{}}
}

// set skips id for d (at most maxCooldown) from now, unless it is already
// skipped for longer.
func (c *Cooldowns) set(id string, d time.Duration, why string) {
	d = min(d, maxCooldown)
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.until[id]; ok && cur.until.After(now.Add(d)) {
		return
	}
	if _, ok := c.until[id]; !ok && len(c.until) >= maxCooldownEntries {
		var soonest string
		for k, v := range c.until {
			if !v.until.After(now) {
				delete(c.until, k)
				continue
			}
			if soonest == "" || v.until.Before(c.until[soonest].until) {
				soonest = k
			}
		}
		if len(c.until) >= maxCooldownEntries {
			delete(c.until, soonest)
		}
	}
	c.until[id] = cooldown{until: now.Add(d), why: why}
}

// left is how long id is still skipped (0: not) and why.
func (c *Cooldowns) left(id string) (time.Duration, string) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	cd, ok := c.until[id]
	if !ok {
		return 0, ""
	}
	if !cd.until.After(now) {
		delete(c.until, id)
		return 0, ""
	}
	return cd.until.Sub(now), cd.why
}

// clear ends id's cooldown: it answered.
func (c *Cooldowns) clear(id string) {
	c.mu.Lock()
	delete(c.until, id)
	c.mu.Unlock()
}

// APIKey is one labelled API key of a profile (Provider.Keys). The label names
// it in logs and the ledger; the value is never logged.
type APIKey struct {
	Label, Value string
}

// keyring rotates the API keys of one profile: each request takes the next key
// that is not cooling down (Cooldowns). Safe for concurrent use.
type keyring struct {
	profile string
	keys    []APIKey
	ids     []string // the cooldown id of each key
	cd      *Cooldowns
	mu      sync.Mutex
	next    int
}

func newKeyring(profile string, keys []APIKey, cd *Cooldowns) *keyring {
	k := &keyring{profile: profile, keys: keys, cd: cd}
	for _, key := range keys {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key.Value))
		k.ids = append(k.ids, "key:"+profile+"#"+key.Label+"#"+strconv.FormatUint(h.Sum64(), 36))
	}
	return k
}

// pick returns the index of the next key in rotation that is not cooling down
// and not in tried, with fresh true; when every key is cooling or tried, the
// untried key that comes back first (else the next one), with fresh false. A
// nil keyring or one without keys returns 0, false.
func (k *keyring) pick(tried map[int]bool) (int, bool) {
	if k == nil || len(k.keys) == 0 {
		return 0, false
	}
	k.mu.Lock()
	start := k.next
	k.next = (k.next + 1) % len(k.keys)
	k.mu.Unlock()
	best, bestLeft := start, time.Duration(-1)
	for n := range len(k.keys) {
		i := (start + n) % len(k.keys)
		if tried[i] {
			continue
		}
		d, _ := k.cd.left(k.ids[i])
		if d == 0 {
			return i, true
		}
		if bestLeft < 0 || d < bestLeft {
			best, bestLeft = i, d
		}
	}
	return best, false
}

// cooling is how long until a key is usable again (0: one is now), with the
// reason of the key that comes back first.
func (k *keyring) cooling() (time.Duration, string) {
	if k == nil || len(k.keys) == 0 {
		return 0, ""
	}
	var soonest time.Duration = -1
	why := ""
	for _, id := range k.ids {
		d, w := k.cd.left(id)
		if d == 0 {
			return 0, ""
		}
		if soonest < 0 || d < soonest {
			soonest, why = d, w
		}
	}
	return soonest, why
}
