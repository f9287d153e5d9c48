package feishu

import (
	"context"
	"encoding/json"
	"sync"
)

// wsParallel bounds the long-connection events being handled at once.
const wsParallel = 64

// keyed runs functions concurrently across keys and in submission order within a
// key, at most limit at a time (DESIGN.md §4: order within a conversation is
// kept; events of different chats are stored concurrently, so their
// Engine.Ingest calls share commits). Go blocks while limit functions are pending;
// wait waits for every function submitted.
type keyed struct {
	sem  chan struct{}
	mu   sync.Mutex
	tail map[string]chan struct{} // closed when the key's last submitted function returned
	wg   sync.WaitGroup
}

func newKeyed(limit int) *keyed {
	return &keyed{sem: make(chan struct{}, limit), tail: map[string]chan struct{}{}}
}

// Go runs fn after every function submitted earlier with the same key returned.
// It returns false, without running fn, when ctx ends while waiting for room.
func (k *keyed) Go(ctx context.Context, key string, fn func()) bool {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	done := make(chan struct{})
	k.mu.Lock()
	prev := k.tail[key]
	k.tail[key] = done
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer func() { <-k.sem }()
		defer func() {
			k.mu.Lock()
			if k.tail[key] == done {
				delete(k.tail, key)
			}
			k.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev // holds no slot the earlier function needs: it has its own
		}
		fn()
	}()
	return true
}

func (k *keyed) wait() { k.wg.Wait() }

// payloadKey is the chat an event payload belongs to (a message's chat_id, a card
// click's open_chat_id); "" (one shared key) when it names none.
func payloadKey(payload []byte) string {
	var p struct {
		Event struct {
			Message struct {
				ChatID string `json:"chat_id"`
			} `json:"message"`
			Context struct {
				OpenChatID string `json:"open_chat_id"`
			} `json:"context"`
		} `json:"event"`
		OpenChatID string `json:"open_chat_id"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	switch {
	case p.Event.Message.ChatID != "":
		return p.Event.Message.ChatID
	case p.Event.Context.OpenChatID != "":
		return p.Event.Context.OpenChatID
	}
	return p.OpenChatID
}
