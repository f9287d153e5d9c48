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

// len is the number of sessions kept (tests).
func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}

// failures counts wrong tokens in the current minute (a fixed window), so
// guessing the token through the login form is slow whoever guesses.
type failures struct {
	mu     sync.Mutex
	window time.Time // start of the current minute
	n      int
}

// allow reports whether a login may be tried at now.
func (f *failures) allow(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.window) >= time.Minute {
		f.window, f.n = now, 0
	}
	return f.n < MaxFailedLogins
}

// add counts a wrong token at now.
func (f *failures) add(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.window) >= time.Minute {
		f.window, f.n = now, 0
	}
	f.n++
}
