package telegram

import (
	"testing"
	"time"

	"openbot/core"
)

// TestPendingNewBounded: without a Cursors store a pending /new is remembered in
// memory for at most maxPendingNew conversations, the least recently marked
// forgotten first, so a burst of chats does not grow it without bound.
func TestPendingNewBounded(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	a.cursors = nil
	ctx := t.Context()
	for i := range maxPendingNew + 100 {
		if err := a.setPendingNew(ctx, Conversation{Chat: int64(1000 + i)}, true); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.newPending.Len(); n != maxPendingNew {
		t.Fatalf("%d pending /new remembered, want at most %d", n, maxPendingNew)
	}
	if on, _ := a.pendingNew(ctx, Conversation{Chat: 1000}); on {
		t.Error("the oldest pending /new is still remembered")
	}
	last := Conversation{Chat: int64(1000 + maxPendingNew + 99)}
	if on, _ := a.pendingNew(ctx, last); !on {
		t.Error("the newest pending /new was forgotten")
	}
	if err := a.setPendingNew(ctx, last, false); err != nil {
		t.Fatal(err)
	}
	if on, _ := a.pendingNew(ctx, last); on {
		t.Error("a cleared pending /new is still remembered")
	}
}

// TestProgressBounded: the parts already sent of half-delivered entries are kept
// for at most maxProgress entries, the least recently used forgotten first.
func TestProgressBounded(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	for i := range maxProgress + 10 {
		a.setProgress(core.OutboxID(i+1), sent{parts: 1, first: "1"}, true)
	}
	if n := a.progress.Len(); n != maxProgress {
		t.Fatalf("%d progress entries, want %d", n, maxProgress)
	}
	if _, ok := a.progress.Get(core.OutboxID(maxProgress+10), time.Now()); !ok {
		t.Error("the newest progress entry was forgotten")
	}
	a.setProgress(core.OutboxID(maxProgress+10), sent{}, false)
	if _, ok := a.progress.Get(core.OutboxID(maxProgress+10), time.Now()); ok {
		t.Error("a finished entry's progress is still kept")
	}
}
