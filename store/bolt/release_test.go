package bolt

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
