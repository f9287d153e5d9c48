package bolt

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// rssFileKB reads this process's file-backed resident memory (Linux).
func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseMappedGivesPagesBack: the pages of the memory map a read brought in
// leave the process's RSS when released, and the data reads back the same.
func TestReleaseMappedGivesPagesBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("releasing mapped pages is Linux only")
	}
	st, err := Open(filepath.Join(t.TempDir(), "release.db"), Options{NoSync: true, ReleaseEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n, size = 4096, 4096 // 16 MiB of values
	val := bytes.Repeat([]byte{'x'}, size)
	err = st.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("release-test"))
		if err != nil {
			return err
		}
		for i := range n {
			if err := b.Put([]byte(strconv.Itoa(i)), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	readAll := func() {
		t.Helper()
		err := st.db.View(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte("release-test")).ForEach(func(k, v []byte) error {
				if !bytes.Equal(v, val) {
					t.Fatalf("value %s changed", k)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	readAll()
	before := rssFileKB(t)
	if err := releaseMapped(st.db); err != nil {
		t.Fatal(err)
	}
	after := rssFileKB(t)
	if before-after < 8<<10 {
		t.Fatalf("file-backed RSS %d kB -> %d kB after the release, want at least 8 MiB less (16 MiB were read)", before, after)
	}
	readAll()
}

// TestReleaseSkippedWhenIdle: a tick releases the map's pages only when the
// store was used since the last release (the release's own read not counted),
// so an idle store costs nothing; the loop ends when stopped.
func TestReleaseSkippedWhenIdle(t *testing.T) {
	stop := make(chan struct{})
	tick := make(chan time.Time) // unbuffered: a send returns once the previous tick was handled
	var used, releases atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseLoop(stop, tick, used.Load, func() {
			releases.Add(1)
			used.Add(1) // the release's own read transaction
		})
	}()
	step := func(reads int64, want int64) {
		t.Helper()
		used.Add(reads)
		tick <- time.Time{}
		tick <- time.Time{} // handled after the first: the loop is back waiting
		if got := releases.Load(); got != want {
			t.Fatalf("releases %d, want %d", got, want)
		}
	}
	step(0, 1) // the first tick releases what opening the store read
	step(0, 1) // idle: nothing more
	step(3, 2) // reads: one release
	step(0, 2) // idle again
	close(stop)
	<-done
}

// TestActivityCountsReadsAndWrites: the count the release loop watches moves
// with a read transaction, a Get and a commit, and not otherwise.
func TestActivityCountsReadsAndWrites(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "activity.db"), Options{NoSync: true, ReleaseEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a0 := activity(st.db)
	if a1 := activity(st.db); a1 != a0 {
		t.Fatalf("activity moved from %d to %d with nothing done", a0, a1)
	}
	if err := st.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("activity"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	a1 := activity(st.db)
	if a1 == a0 {
		t.Fatalf("activity did not move after a commit (%d)", a1)
	}
	if err := st.db.View(func(tx *bbolt.Tx) error {
		_ = tx.Bucket([]byte("activity")).Get([]byte("k"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if a2 := activity(st.db); a2 == a1 {
		t.Fatalf("activity did not move after a read (%d)", a2)
	}
}
