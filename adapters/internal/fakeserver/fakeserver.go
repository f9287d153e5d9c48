// Package fakeserver is what the platform fakes (slacktest, telegramtest,
// feishutest) share: a signal to wait on for "the fake's record changed", calls
// held in flight at a test's request, and JSON answers. What each platform's
// wire protocol says stays in its own fake, and so do the websocket servers:
// Slack's Socket Mode speaks JSON text frames through gorilla/websocket (what
// slack-go dials), Feishu's long connection binary pbbp2 frames through
// coder/websocket; Telegram has none.
package fakeserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"openbot/internal/waitctx"
)

// Changes wakes every waiter when the fake's record changes (a call, a message,
// a connection). The zero value is ready to use; it is safe for concurrent use
// and may be notified while the fake holds its own lock.
type Changes struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by Notify
}

func (c *Changes) current() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Notify wakes the waiters.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
	}
	c.ch = make(chan struct{})
}

// Wait blocks until cond returns true, checking it now and after every Notify,
// or until ctx is done, and then returns ctx's error.
func (c *Changes) Wait(ctx context.Context, cond func() bool) error {
	for {
		ch := c.current()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Holds keeps calls waiting, by key (a method name), until a test releases them,
// so it can see what happens while a call is in flight. The zero value is ready
// to use; it is safe for concurrent use.
type Holds struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// Hold makes calls of key wait in Wait until release is called. release is
// idempotent.
func (h *Holds) Hold(key string) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	if h.m == nil {
		h.m = map[string]chan struct{}{}
	}
	h.m[key] = ch
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.m[key] == ch {
				delete(h.m, key)
			}
			h.mu.Unlock()
			close(ch)
		})
	}
}

// Wait blocks while key is held; it returns false when ctx (the request's) ends
// first, and the handler should then give up.
func (h *Holds) Wait(ctx context.Context, key string) bool {
	h.mu.Lock()
	ch := h.m[key]
	h.mu.Unlock()
	return waitctx.Closed(ctx, ch)
}

// WriteJSON answers with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
