package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// session is one login: its CSRF token and when it ends.
type session struct {
	csrf    string
	expires time.Time
}

// csrfOK compares tok with the session's CSRF token in constant time.
func (s session) csrfOK(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) == 1
}

// sessions is the in-memory session table, keyed by the SHA-256 of the
// session id (the id itself is kept only in the browser's cookie). At most max
// sessions are kept: a new one past it drops the one that expires first.
type sessions struct {
	mu  sync.Mutex
	m   map[[32]byte]session
	max int
	ttl time.Duration
	now func() time.Time
}

func newSessions(max int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: make(map[[32]byte]session), max: max, ttl: ttl, now: now}
}

// randomToken is 32 bytes from crypto/rand, base64url without padding.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its id (for the cookie).
func (ss *sessions) create() (string, session) {
	id := randomToken()
	s := session{csrf: randomToken(), expires: ss.now().Add(ss.ttl)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, v := range ss.m {
		if !now.Before(v.expires) {
			delete(ss.m, k)
		}
	}
	for len(ss.m) >= ss.max {
		var oldest [32]byte
		first := true
		for k, v := range ss.m {
			if first || v.expires.Before(ss.m[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[sha256.Sum256([]byte(id))] = s
	return id, s
}

// get returns the live session of id; an expired one is dropped.
func (ss *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[k]
	if !ok {
		return session{}, false
	}
	if !ss.now().Before(s.expires) {
		delete(ss.m, k)
		return session{}, false
	}
	return s, true
}

// drop ends the session of id.
func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sha256.Sum256([]byte(id)))
}

// failures counts wrong admin tokens per client (clientKey: an IPv4 address or
// an IPv6 /64) in a fixed one-minute window, so guessing the token is slow from
// any one client, and one client's wrong guesses never lock out the admin
// signing in from another address (the listener is public for webhooks). There
// is no ceiling over all clients: many addresses guessing together must not
// lock out the right token either. The table of clients is bounded
// (maxFailureClients); a new client past it, while every entry is inside its
// minute, is not counted (its guesses are still refused one by one, logged and
// in the metric). It also paces the WARN lines of refusals (logLine).
type failures struct {
	mu      sync.Mutex
	clients map[string]*window
	// The refusal log: when the last WARN line was written and how many
	// refusals have not been logged since.
	lastLog  time.Time
	unlogged int
}

// window is a fixed one-minute count of wrong tokens.
type window struct {
	start time.Time
	n     int
}

// roll starts a new window at now when the current one is over.
func (w *window) roll(now time.Time) {
	if now.Sub(w.start) >= time.Minute {
		w.start, w.n = now, 0
	}
}

// allow reports whether client may try a token at now: fewer than
// MaxFailedLogins wrong tokens from it in its current minute.
func (f *failures) allow(client string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clients[client]; c != nil {
		c.roll(now)
		return c.n < MaxFailedLogins
	}
	return true
}

// add counts a wrong token from client at now.
func (f *failures) add(client string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clients == nil {
		f.clients = map[string]*window{}
	}
	c := f.clients[client]
	if c == nil {
		if len(f.clients) >= maxFailureClients {
			for k, v := range f.clients { // drop the clients whose minute is over
				if now.Sub(v.start) >= time.Minute {
					delete(f.clients, k)
				}
			}
		}
		if len(f.clients) >= maxFailureClients {
			return
		}
		c = &window{start: now}
		f.clients[client] = c
	}
	c.roll(now)
	c.n++
}

// logLine reports whether a refusal at now gets a WARN line: the first one does,
// and then at most one each refusalLogEvery, so a flood of wrong tokens cannot
// flood the log but never goes unlogged. unlogged is how many refusals since
// the previous line had none.
func (f *failures) logLine(now time.Time) (ok bool, unlogged int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lastLog.IsZero() && now.Sub(f.lastLog) < refusalLogEvery {
		f.unlogged++
		return false, 0
	}
	f.lastLog, unlogged, f.unlogged = now, f.unlogged, 0
	return true, unlogged
}
