package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// BenchmarkRawBatch is the floor for ingestion: one small put per db.Batch call
// from parallel goroutines (par per GOMAXPROCS), with fsync (as in production) and
// without. Every caller blocks until its batch commits, and bbolt commits a batch
// after MaxBatchDelay (10ms) unless MaxBatchSize (1000) calls arrive first, so ns/op
// falls as callers are added. Core's Ingest benchmark compares against the same par.
func BenchmarkRawBatch(b *testing.B) {
	for _, c := range []struct {
		par    int
		noSync bool
	}{{1, false}, {8, false}, {64, false}, {64, true}} {
		b.Run(fmt.Sprintf("par=%d/nosync=%v", c.par, c.noSync), func(b *testing.B) {
			noSync := c.noSync
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bbolt.Options{Timeout: DefaultTimeout, NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			name := []byte("b")
			if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket(name); return err }); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 200)
			b.SetParallelism(c.par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := db.Batch(func(tx *bbolt.Tx) error {
						bk := tx.Bucket(name)
						seq, err := bk.NextSequence()
						if err != nil {
							return err
						}
						return bk.Put(u64(seq), value)
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkStoreBatch is an ingestion-shaped write through Store.Batch (dedup key,
// thread, key binding, message, one inbox item) from parallel goroutines, with fsync.
func BenchmarkStoreBatch(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) { benchStoreBatch(b, par) })
	}
}

func benchStoreBatch(b *testing.B, par int) {
	s, err := Open(filepath.Join(b.TempDir(), "store.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Uint64
	b.SetParallelism(par)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("slack:T1:C1:%d", n.Add(1))
			err := s.Batch(context.Background(), func(tx core.Tx) error {
				if _, err := tx.Seen(key); err == nil {
					return nil
				}
				th, err := tx.PutThread(core.Thread{Key: key, Participants: []core.ActorID{"slack:T1:U1"}})
				if err != nil {
					return err
				}
				if err := tx.BindThreadKey(key, th.ID); err != nil {
					return err
				}
				m, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "slack:T1:U1", Text: "@engineer please look at the failing build"})
				if err != nil {
					return err
				}
				if _, err := tx.PutItem(core.InboxItem{Actor: "bot:engineer", Thread: th.ID, Kind: core.ItemMessage, Message: m.ID, Status: core.ItemQueued}); err != nil {
					return err
				}
				return tx.MarkSeen(key, m.ID)
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextQueued picks the oldest queued item of one actor with 10 and with
// 100,000 queued items spread over 1,000 threads and 4 actors. The pick is a cursor
// seek to the actor's prefix, so its cost should not grow with the queue. The
// parked variant skips every item of the actor's oldest thread first.
func BenchmarkNextQueued(b *testing.B) {
	for _, total := range []int{10, 100_000} {
		s := fillQueue(b, total, 1000, 4)
		for _, parked := range []bool{false, true} {
			b.Run(fmt.Sprintf("items=%d/parked=%v", total, parked), func(b *testing.B) {
				ctx := context.Background()
				var skip func(core.InboxItem) bool
				if parked {
					var first core.ThreadID
					_ = s.View(ctx, func(tx core.ReadTx) error {
						it, err := tx.NextQueued("bot:a0", nil)
						first = it.Thread
						return err
					})
					skip = func(it core.InboxItem) bool { return it.Thread == first }
				}
				b.ResetTimer()
				for b.Loop() {
					err := s.View(ctx, func(tx core.ReadTx) error {
						_, err := tx.NextQueued("bot:a0", skip)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		_ = s.Close()
	}
}

// fillQueue stores total queued items round-robin over threads and actors.
func fillQueue(b *testing.B, total, threads, actors int) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "queue.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	err = s.Update(context.Background(), func(tx core.Tx) error {
		ths := make([]core.ThreadID, min(threads, total))
		for i := range ths {
			th, err := tx.PutThread(core.Thread{Key: fmt.Sprint(i)})
			if err != nil {
				return err
			}
			ths[i] = th.ID
		}
		for i := range total {
			_, err := tx.PutItem(core.InboxItem{
				Actor: core.ActorID(fmt.Sprintf("bot:a%d", i%actors)), Thread: ths[i%len(ths)],
				Kind: core.ItemMessage, Message: core.MessageID(i + 1), Status: core.ItemQueued,
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
