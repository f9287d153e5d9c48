package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Pausing a bot (DESIGN.md §10): a paused bot starts no run, its mailbox keeps
// filling and runs already in flight go on; resuming lets its worker pick again.
// The flag is stored (a cursor named by PausedCursor), so a restart keeps it.

// PausedCursor is the store cursor that holds bot handle's pause (a JSON
// PauseInfo; "" or absent: not paused). admin reads it to show paused bots.
func PausedCursor(handle string) string { return "core/paused/" + handle }

// PauseInfo says who paused a bot and when.
type PauseInfo struct {
	By   ActorID   `json:"by,omitempty"`
	Name string    `json:"name,omitempty"`
	At   time.Time `json:"at"`
}

// PausedTx reads bot handle's pause from the store; ok is false when the bot is
// not paused.
func PausedTx(tx ReadTx, handle string) (info PauseInfo, ok bool, err error) {
	v, err := tx.Cursor(PausedCursor(handle))
	if errors.Is(err, ErrNotFound) || err == nil && v == "" {
		return PauseInfo{}, false, nil
	} else if err != nil {
		return PauseInfo{}, false, err
	}
	if json.Unmarshal([]byte(v), &info) != nil {
		info = PauseInfo{} // a corrupt value still pauses: fail closed
	}
	return info, true, nil
}

// botLockCursor is bot handle's lock row (lockBotTx).
func botLockCursor(handle string) string { return "core/botlock/" + handle }

// lockBotTx writes bot handle's lock row inside tx. A pick decides on the bot
// as a whole (whether it is paused, how many threads it runs against its
// max_parallel_threads, in every process when shared) but writes only rows of
// the threads it picks, and a pause writes only the pause: in a store that runs
// write transactions at once under snapshot isolation, two picks in different
// threads, or a pick and a pause, would each miss the other's write. Both
// writing this row makes the later one conflict and run again on a fresh
// snapshot. Where write transactions run one at a time it changes nothing.
func lockBotTx(tx Tx, handle string, now time.Time) error {
	return tx.SetCursor(botLockCursor(handle), now.UTC().Format(time.RFC3339Nano))
}

// PauseBot pauses bot handle on behalf of by; pausing a paused bot changes
// nothing. Errors: ErrUnknownBot, else store failures.
func (e *Engine) PauseBot(ctx context.Context, handle string, by By) error {
	return e.control.setPaused(ctx, handle, by, true)
}

// ResumeBot lets a paused bot handle work again and wakes its worker; resuming a
// bot that is not paused changes nothing. Errors: ErrUnknownBot, else store
// failures.
func (e *Engine) ResumeBot(ctx context.Context, handle string, by By) error {
	return e.control.setPaused(ctx, handle, by, false)
}

func (ct *control) setPaused(ctx context.Context, handle string, by By, on bool) error {
	handle = strings.ToLower(strings.TrimPrefix(handle, "@"))
	b, ok := ct.e.bot(handle)
	if !ok {
		return ErrUnknownBot
	}
	err := ct.e.store.Update(ctx, func(tx Tx) error {
		_, was, err := PausedTx(tx, handle)
		if err != nil || was == on {
			return err
		}
		v, event, verb := "", "bot.resumed", "resumed"
		if on {
			v, event, verb = string(mustJSON(PauseInfo{By: by.Actor, Name: by.name(), At: ct.e.clock.Now()})), "bot.paused", "paused"
		}
		if err := tx.SetCursor(PausedCursor(handle), v); err != nil {
			return err
		}
		if err := lockBotTx(tx, handle, ct.e.clock.Now()); err != nil {
			return err
		}
		summary := fmt.Sprintf("@%s %s by %s", handle, verb, by.name())
		if by.Via != "" {
			summary += " via " + string(by.Via)
		}
		ct.e.activity(tx, Activity{Event: event, Level: "warn", Summary: summary, Actor: by.Actor})
		return nil
	})
	if err == nil && !on {
		ct.e.sched.wake(b.Handle)
	}
	return err
}

// pausedActorTx reports whether actor is a paused bot; read errors count as not
// paused.
func pausedActorTx(tx ReadTx, actor ActorID) bool {
	h, ok := strings.CutPrefix(string(actor), "bot:")
	if !ok {
		return false
	}
	_, paused, _ := PausedTx(tx, h)
	return paused
}
