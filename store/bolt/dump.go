package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"openbot/core"
	"openbot/store/dump"
)

// counterBuckets are the buckets whose NextSequence assigns IDs; their names
// are the counter names of package dump.
var counterBuckets = [][]byte{bktThreads, bktMessages, bktItems, bktRuns, bktOutbox, bktActivity, bktQuestions, bktRunEventLog, bktUsage, bktMemories, bktReflections}

// Dump calls emit with every record of the store, kind by kind in
// dump.AllKinds order, inside one read transaction (one consistent snapshot),
// and returns the ID counters and the count of records per kind. Run events are
// emitted in their store-wide order with their position. It stops at the first
// error of emit or ctx.
func (s *Store) Dump(ctx context.Context, emit func(dump.Record) error) (dump.Counters, dump.Counts, error) {
	counters := dump.Counters{}
	counts := dump.Counts{}
	err := s.View(ctx, func(core.ReadTx) error { return nil }) // closed/ctx checks
	if err != nil {
		return nil, nil, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		for _, b := range counterBuckets {
			counters[string(b)] = tx.Bucket(b).Sequence()
		}
		send := func(kind string, v any) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			counts[kind]++
			return emit(dump.Record{Kind: kind, Value: v})
		}
		each := func(bucket []byte, kind string, decode func(k, v []byte) (any, error)) error {
			counts[kind] += 0
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				rec, err := decode(k, v)
				if errors.Is(err, errSkip) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("%s %x: %w", kind, k, err)
				}
				return send(kind, rec)
			})
		}
		steps := []struct {
			bucket []byte
			kind   string
			decode func(k, v []byte) (any, error)
		}{
			{bktActors, dump.Actors, jsonOf[core.Actor]()},
			{bktBots, dump.Bots, jsonOf[core.BotProfile]()},
			{bktThreads, dump.Threads, jsonOf[core.Thread]()},
			{bktThreadKeys, dump.ThreadKeys, func(k, v []byte) (any, error) {
				return dump.ThreadKey{Key: string(k), Thread: core.ThreadID(decodeU64(v))}, nil
			}},
			{bktMessages, dump.Messages, jsonOf[core.Message]()},
			{bktItems, dump.Items, jsonOf[core.InboxItem]()},
			{bktRuns, dump.Runs, func(k, v []byte) (any, error) {
				return (&readTx{tx: tx}).decodeRun(k, v)
			}},
			{bktRunEventLog, dump.RunEvents, func(k, v []byte) (any, error) {
				data := tx.Bucket(bktRunEvents).Get(v)
				if data == nil {
					return nil, errSkip
				}
				e := core.LoggedRunEvent{Pos: decodeU64(k)}
				return e, json.Unmarshal(data, &e.RunEvent)
			}},
			{bktOutbox, dump.Outbox, jsonOf[core.OutboxEntry]()},
			{bktSeen, dump.Seen, func(k, v []byte) (any, error) {
				return dump.SeenKey{Key: string(k), Message: core.MessageID(decodeU64(v))}, nil
			}},
			{bktTodos, dump.Todos, func(k, v []byte) (any, error) {
				t := dump.Todo{Bot: core.ActorID(k[:len(k)-9]), Thread: core.ThreadID(decodeU64(k[len(k)-8:]))}
				return t, json.Unmarshal(v, &t.Items)
			}},
			{bktActivity, dump.Activity, jsonOf[core.Activity]()},
			{bktCursors, dump.Cursors, func(k, v []byte) (any, error) {
				return dump.Cursor{Name: string(k), Value: string(v)}, nil
			}},
			{bktQuestions, dump.Questions, jsonOf[core.Question]()},
			{bktUsage, dump.Usage, jsonOf[core.UsageEntry]()},
			{bktUsageTotals, dump.UsageTotals, func(k, v []byte) (any, error) {
				t := dump.UsageTotal{Scope: string(k)}
				return t, json.Unmarshal(v, &t.Total)
			}},
			{bktMemories, dump.Memories, jsonOf[core.Memory]()},
			{bktReflections, dump.PendingReflections, jsonOf[core.PendingReflection]()},
			{bktMessageVectors, dump.MessageVectors, jsonOf[core.MessageVector]()},
		}
		for _, st := range steps {
			if err := each(st.bucket, st.kind, st.decode); err != nil {
				return err
			}
		}
		return nil
	})
	return counters, counts, err
}

// errSkip marks a run_event_log entry whose event retention removed.
var errSkip = errors.New("skip")

func jsonOf[T any]() func(k, v []byte) (any, error) {
	return func(_, v []byte) (any, error) {
		var x T
		err := json.Unmarshal(v, &x)
		return x, err
	}
}
