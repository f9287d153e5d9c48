// Package storetest is the conformance suite every core.Store implementation must
// pass (DESIGN.md §7, STYLE.md "a conformance suite that any Store implementation
// must pass"). An implementation's test calls Run with a function that opens a fresh,
// empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) core.Store { return openTemp(t) })
//	}
//
// Besides what core/store.go states, the suite pins down these contract details:
//   - IDs are assigned from 1 and strictly increase in assignment order, per kind.
//   - A Put with a non-zero ID that was never assigned fails with core.ErrNotFound.
//   - A limit <= 0 on a listing means no limit.
//   - Values round-trip exactly (the suite uses UTC times at microsecond precision
//     and compact JSON in raw fields), and slices read back compare equal with
//     reflect.DeepEqual to what was written.
//   - Bots lists every profile; order is not part of the contract.
//   - PutTodo with an empty list removes the list (Todo returns nil).
package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"openbot/core"
)

// Run runs every conformance subtest. open must return a fresh, empty store; Run
// closes each store it opens when its subtest ends (a second Close is tolerated and
// its error ignored).
func Run(t *testing.T, open func(t *testing.T) core.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s core.Store)
	}{
		{"ActorsAndBots", testActorsAndBots},
		{"Threads", testThreads},
		{"ThreadKeys", testThreadKeys},
		{"Messages", testMessages},
		{"ItemLifecycle", testItemLifecycle},
		{"ItemIndexesModel", testItemIndexesModel},
		{"NextQueuedSkip", testNextQueuedSkip},
		{"Runs", testRuns},
		{"RunEvents", testRunEvents},
		{"Outbox", testOutbox},
		{"Dedup", testDedup},
		{"Todo", testTodo},
		{"Activities", testActivities},
		{"Cursors", testCursors},
		{"Leases", testLeases},
		{"Questions", testQuestions},
		{"ConsolePaging", testConsolePaging},
		{"RunEventsSince", testRunEventsSince},
		{"Usage", testUsage},
		{"Memories", testMemories},
		{"PendingReflections", testPendingReflections},
		{"MessageVectors", testMessageVectors},
		{"UpdateRollback", testUpdateRollback},
		{"BatchRollback", testBatchRollback},
		{"ValuesOutliveView", testValuesOutliveView},
		{"ConcurrentBatch", testConcurrentBatch},
		{"BatchRerun", testBatchRerun},
		{"CanceledContext", testCanceledContext},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

// at returns a fixed UTC time n seconds after a base, exact under any encoding.
func at(n int) time.Time {
	return time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
}

func update(t *testing.T, s core.Store, fn func(tx core.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s core.Store, fn func(tx core.ReadTx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// result holds a (value, error) pair so get(tx.Item(id)).must(t) reads inline.
type result[T any] struct {
	v   T
	err error
}

func get[T any](v T, err error) result[T] { return result[T]{v, err} }

// must returns the value or fails the test on the error.
func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("%s: got error %v, want core.ErrNotFound", what, err)
	}
}

func wantEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// newThread stores a minimal thread and returns it as stored.
func newThread(t *testing.T, tx core.Tx, key string) core.Thread {
	t.Helper()
	return get(tx.PutThread(core.Thread{Key: key, Participants: []core.ActorID{"console:you"}, Created: at(0)})).must(t)
}

func newMessage(t *testing.T, tx core.Tx, thread core.ThreadID, text string) core.Message {
	t.Helper()
	return get(tx.PutMessage(core.Message{Thread: thread, Sender: "console:you", SenderName: "You", Text: text, Created: at(1)})).must(t)
}

func newItem(t *testing.T, tx core.Tx, actor core.ActorID, thread core.ThreadID) core.InboxItem {
	t.Helper()
	return get(tx.PutItem(core.InboxItem{Actor: actor, Thread: thread, Kind: core.ItemMessage, Message: 1, Status: core.ItemQueued, Created: at(2)})).must(t)
}

func ids[T any, ID comparable](list []T, id func(T) ID) []ID {
	out := []ID{}
	for _, v := range list {
		out = append(out, id(v))
	}
	return out
}

func itemIDs(list []core.InboxItem) []core.ItemID {
	return ids(list, func(it core.InboxItem) core.ItemID { return it.ID })
}

func messageIDs(list []core.Message) []core.MessageID {
	return ids(list, func(m core.Message) core.MessageID { return m.ID })
}

func runIDs(list []core.Run) []core.RunID {
	return ids(list, func(r core.Run) core.RunID { return r.ID })
}

func outboxIDs(list []core.OutboxEntry) []core.OutboxID {
	return ids(list, func(o core.OutboxEntry) core.OutboxID { return o.ID })
}
