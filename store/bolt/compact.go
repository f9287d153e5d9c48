package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// compactTxBytes bounds one transaction of the copy, so a large file does not
// need its whole size in memory.
const compactTxBytes = 64 << 20

// CompactResult is the file size before and after Compact, in bytes.
type CompactResult struct {
	Before, After int64
}

// Compact rewrites the store file at path offline (`openbot store compact`,
// DESIGN.md §10 "retention"): bbolt never gives freed pages back to the file
// system, so after pruning the file keeps its size until it is rewritten. It
// takes the file lock (ErrLocked after timeout when openbot is running), copies
// every bucket into path+".compact", checks the copy with Verify, and renames it
// over path. On any error path is untouched and the partial copy removed.
func Compact(ctx context.Context, path string, timeout time.Duration) (CompactResult, error) {
	var res CompactResult
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	fi, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("store %s: %w", path, err)
	}
	res.Before = fi.Size()
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return res, fmt.Errorf("store %s: %w (waited %s): stop openbot first", path, ErrLocked, timeout)
		}
		return res, fmt.Errorf("store %s: open: %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: timeout})
	if err != nil {
		return res, fmt.Errorf("store %s: create copy: %w", path, err)
	}
	fail := func(err error) (CompactResult, error) {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return res, fmt.Errorf("store %s: compact: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := bbolt.Compact(dst, src, compactTxBytes); err != nil {
		return fail(err)
	}
	if err := dst.Close(); err != nil {
		return fail(err)
	}
	// The copy must open and verify before it replaces the original.
	st, err := Open(tmp, Options{Timeout: timeout})
	if err != nil {
		return fail(err)
	}
	verr := st.Verify(ctx)
	if err := errors.Join(verr, st.Close()); err != nil {
		_ = os.Remove(tmp)
		return res, fmt.Errorf("store %s: compacted copy does not verify: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return res, fmt.Errorf("store %s: replace with compacted copy: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		res.After = fi.Size()
	}
	return res, nil
}
