package postgres

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/store/check"
)

// Lease implements core.ReadTx (core/lease.go).
func (r *readTx) Lease(key string) (core.Lease, error) {
	var data []byte
	err := r.tx.QueryRow(r.ctx, `SELECT data FROM leases WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Lease{}, fmt.Errorf("lease %q: %w", key, core.ErrNotFound)
	}
	if err != nil {
		return core.Lease{}, fmt.Errorf("lease %q: %w", key, err)
	}
	var l core.Lease
	if err := json.Unmarshal(data, &l); err != nil {
		return core.Lease{}, fmt.Errorf("lease %q: %w", key, err)
	}
	return l, nil
}

// Leases implements core.ReadTx: keys starting with prefix, by key.
func (r *readTx) Leases(prefix string) ([]core.Lease, error) {
	rows, err := r.tx.Query(r.ctx, `SELECT data FROM leases WHERE starts_with(key, $1) ORDER BY key COLLATE "C"`, prefix)
	if err != nil {
		return nil, fmt.Errorf("leases %q: %w", prefix, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.Lease, error) {
		var data []byte
		if err := row.Scan(&data); err != nil {
			return core.Lease{}, err
		}
		var l core.Lease
		err := json.Unmarshal(data, &l)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("leases %q: %w", prefix, err)
	}
	return out, nil
}

// PutLease implements core.Tx.
func (w *writeTx) PutLease(l core.Lease) error {
	if err := check.Lease(l); err != nil {
		return err
	}
	return w.upsert("put lease", `INSERT INTO leases (key, owner, until, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, until = EXCLUDED.until, data = EXCLUDED.data`,
		l, l.Key, l.Owner, l.Until)
}

// DeleteLease implements core.Tx.
func (w *writeTx) DeleteLease(key string) error {
	return w.exec("delete lease", `DELETE FROM leases WHERE key = $1`, key)
}
