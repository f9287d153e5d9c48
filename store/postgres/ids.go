package postgres

import (
	"context"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"
)

// idCache holds the ID counters of one write transaction in memory: read once
// at the first ID assigned (the write lock makes them stable until commit) and
// written back just before commit, so assigning an ID costs no round trip.
type idCache struct {
	loaded bool
	vals   map[string]int64
	dirty  map[string]bool
}

func (c *idCache) load(ctx context.Context, tx pgx.Tx) error {
	if c.loaded {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT name, value FROM counters`)
	if err != nil {
		return fmt.Errorf("read id counters: %w", err)
	}
	c.vals, c.dirty = map[string]int64{}, map[string]bool{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			rows.Close()
			return fmt.Errorf("read id counters: %w", err)
		}
		c.vals[name] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read id counters: %w", err)
	}
	c.loaded = true
	return nil
}

// next assigns the next value of counter name.
func (c *idCache) next(ctx context.Context, tx pgx.Tx, name string) (uint64, error) {
	if err := c.load(ctx, tx); err != nil {
		return 0, err
	}
	c.vals[name]++
	c.dirty[name] = true
	return uint64(c.vals[name]), nil
}

// head is the last value assigned of counter name in this transaction, ok
// false when the cache was never loaded (then the table is current).
func (c *idCache) head(name string) (int64, bool) {
	if c == nil || !c.loaded {
		return 0, false
	}
	return c.vals[name], true
}

// flush writes the changed counters back, in one statement.
func (c *idCache) flush(ctx context.Context, tx pgx.Tx) error {
	if !c.loaded || len(c.dirty) == 0 {
		return nil
	}
	var names []string
	var vals []int64
	for n := range c.dirty {
		names = append(names, n)
		vals = append(vals, c.vals[n])
	}
	_, err := tx.Exec(ctx, `INSERT INTO counters (name, value) SELECT * FROM unnest($1::text[], $2::bigint[])
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, names, vals)
	if err != nil {
		return fmt.Errorf("write id counters: %w", err)
	}
	c.dirty = map[string]bool{}
	return nil
}

// snapshot and restore bracket one Batch call, so a call rolled back to its
// savepoint also gives back the IDs it took.
func (c *idCache) snapshot() idCache {
	return idCache{loaded: c.loaded, vals: maps.Clone(c.vals), dirty: maps.Clone(c.dirty)}
}

func (c *idCache) restore(s idCache) { *c = s }
