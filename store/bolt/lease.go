package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"openbot/core"
	"openbot/store/check"
)

// Lease implements core.ReadTx (core/lease.go). A bbolt file has one process,
// so leases only ever have one owner here; they are stored all the same, so the
// engine's code is one for every store.
func (r *readTx) Lease(key string) (core.Lease, error) {
	v := r.bucket(bktLeases).Get([]byte(key))
	if v == nil {
		return core.Lease{}, fmt.Errorf("lease %q: %w", key, core.ErrNotFound)
	}
	var l core.Lease
	if err := json.Unmarshal(v, &l); err != nil {
		return core.Lease{}, fmt.Errorf("lease %q: %w", key, err)
	}
	return l, nil
}

// Leases implements core.ReadTx by a cursor seek to prefix.
func (r *readTx) Leases(prefix string) ([]core.Lease, error) {
	var out []core.Lease
	c := r.bucket(bktLeases).Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		var l core.Lease
		if err := json.Unmarshal(v, &l); err != nil {
			return nil, fmt.Errorf("lease %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// PutLease implements core.Tx.
func (w *writeTx) PutLease(l core.Lease) error {
	if err := check.Lease(l); err != nil {
		return err
	}
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return w.bucket(bktLeases).Put([]byte(l.Key), data)
}

// DeleteLease implements core.Tx.
func (w *writeTx) DeleteLease(key string) error {
	return w.bucket(bktLeases).Delete([]byte(key))
}
