package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// RawBatchRate measures this machine's floor for durable ingestion: n small puts
// (200 bytes, big-endian NextSequence keys) through bbolt's own db.Batch from
// workers concurrent goroutines, fsync on, into a new file at path (removed
// afterwards). It returns puts per second. It is the reference the ingest
// benchmark (BenchmarkIngest) compares core's Ingest against (DESIGN.md §7 ingestion throughput); ctx
// cancels it.
func RawBatchRate(ctx context.Context, path string, n, workers int) (float64, error) {
	if n <= 0 || workers <= 0 {
		return 0, errors.New("bolt: RawBatchRate needs n > 0 and workers > 0")
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: DefaultTimeout})
	if err != nil {
		return 0, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	defer os.Remove(path)
	defer db.Close()
	name := []byte("raw")
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket(name); return err }); err != nil {
		return 0, err
	}
	value := make([]byte, 200)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		next    = make(chan struct{}, n)
		started = time.Now()
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if ctx.Err() != nil {
					return
				}
				err := db.Batch(func(tx *bbolt.Tx) error {
					bk := tx.Bucket(name)
					seq, err := bk.NextSequence()
					if err != nil {
						return err
					}
					return bk.Put(u64(seq), value)
				})
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(started).Seconds(), nil
}
