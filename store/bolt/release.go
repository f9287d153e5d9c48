package bolt

import (
	"time"

	bbolt "go.etcd.io/bbolt"
)

// DefaultReleaseEvery is how often a Store gives back the pages of its memory map
// that reads brought in (Options.ReleaseEvery). Short, because each page fault
// of a read maps a whole fault-around window (64 KiB on Linux: 16 pages for
// the one bbolt asked for), so in a burst the map's RSS grows by megabytes a
// second; a release after nothing was read is skipped, so an idle store does
// not wake the kernel.
const DefaultReleaseEvery = 500 * time.Millisecond

// releaser gives the pages of bbolt's read-only memory map back to the kernel every
// interval (memory flat under bursts, DESIGN.md §9). bbolt reads the file through
// that map, so every page a burst read stays in this process's RSS, as file-backed
// memory, for as long as the file is open: after 5,000 new conversations about as
// much as the Go heap. Giving the pages back costs nothing but a minor fault on
// the next read of each (they stay in the kernel's page cache); the data is the
// file's, so nothing is lost. Where the platform has no such call (not Linux) it
// does nothing.
//
// Its goroutine is owned by the Store: started by Open, stopped by Close before the
// file is closed.
type releaser struct {
	stop chan struct{}
	done chan struct{}
}

func startReleaser(db *bbolt.DB, every time.Duration) *releaser {
	r := &releaser{stop: make(chan struct{}), done: make(chan struct{})}
	if every < 0 || !canRelease {
		close(r.done)
		return r
	}
	if every == 0 {
		every = DefaultReleaseEvery
	}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		releaseLoop(r.stop, t.C, func() int64 { return activity(db) }, func() {
			_ = releaseMapped(db) // best effort: the pages stay mapped on an error
		})
	}()
	return r
}

// releaseLoop calls release at each tick until stop is closed, but only when
// the store was used since the last release (activity changed, counting the
// release's own read transaction as one).
func releaseLoop(stop <-chan struct{}, tick <-chan time.Time, activity func() int64, release func()) {
	last := int64(-1)
	for {
		select {
		case <-stop:
			return
		case <-tick:
			a := activity()
			if a == last {
				continue // nothing read since the last release: no page came in
			}
			release()
			last = a + 1 // the release's own read transaction
		}
	}
}

// activity counts what can bring pages of the map in: read transactions begun,
// cursors opened (every bucket lookup and Get, in read and write transactions,
// once they ended) and pages written.
func activity(db *bbolt.DB) int64 {
	s := db.Stats()
	return int64(s.TxN) + s.TxStats.GetCursorCount() + s.TxStats.GetWrite()
}

// close stops the goroutine and waits for it (at most one release in progress).
func (r *releaser) close() {
	select {
	case <-r.done:
		return
	default:
	}
	close(r.stop)
	<-r.done
}

// releaseMapped gives back the pages of db's memory map. It holds a read
// transaction, so bbolt cannot remap the file (which only a commit that grows it
// does) while the pages are released.
func releaseMapped(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		return dropPages(db.Info().Data, tx.Size())
	})
}
