package slack

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/slack-go/slack/socketmode"
)

// socketParallel bounds the Socket Mode envelopes being handled at once.
const socketParallel = 64

// keyed runs functions concurrently across keys and in submission order within a
// key, at most limit at a time (DESIGN.md §4: order within a conversation is
// kept; envelopes of different conversations are stored concurrently, so their
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

// envelopeKey is the conversation an envelope belongs to, the channel of its
// event, click or command; "" (one shared key) when the payload names none.
func envelopeKey(evt socketmode.Event) string {
	if evt.Request == nil || len(evt.Request.Payload) == 0 {
		return ""
	}
	var p struct {
		Event struct {
			Channel string `json:"channel"`
		} `json:"event"`
		Channel struct {
			ID string `json:"id"`
		} `json:"channel"`
		ChannelID string `json:"channel_id"`
	}
	if json.Unmarshal(evt.Request.Payload, &p) != nil {
		return ""
	}
	switch {
	case p.Event.Channel != "":
		return p.Event.Channel
	case p.Channel.ID != "":
		return p.Channel.ID
	}
	return p.ChannelID
}
