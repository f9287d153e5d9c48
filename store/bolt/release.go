package bolt

import (
	"time"

	bbolt "go.etcd.io/bbolt"
)

// DefaultReleaseEvery is how often a Store gives back the pages of its memory map
// that reads brought in (Options.ReleaseEvery).
const DefaultReleaseEvery = 2 * time.Second

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
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				_ = releaseMapped(db) // best effort: the pages stay mapped on an error
			}
		}
	}()
	return r
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
