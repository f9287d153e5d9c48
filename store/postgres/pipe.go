package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipe is the transaction readTx and writeTx talk to, on one connection.
// Writes whose result nobody reads (later) wait, and go to the server in one
// round trip with the next statement, or with COMMIT (commit): an ingest's
// inserts share round trips instead of costing one each. A write
// transaction's BEGIN waits too (attempt), so it rides with the first
// statement. The error of a waiting write is returned by the statement it
// went with (or by flush or commit), named by its what.
type pipe struct {
	conn    *pgx.Conn
	waiting pgx.Batch
	whats   []string
}

// later queues a write that returns nothing the caller reads; what names it
// in an error.
func (p *pipe) later(what, sql string, args ...any) {
	p.waiting.Queue(sql, args...)
	p.whats = append(p.whats, what)
}

// flush sends the waiting writes, if any.
func (p *pipe) flush(ctx context.Context) error {
	if len(p.whats) == 0 {
		return nil
	}
	br, err := p.send(ctx, "")
	if err != nil {
		return err
	}
	return br.Close()
}

// send sends the waiting writes followed by sql (none when sql is ""), reads
// the writes' results and returns the batch positioned at sql's.
func (p *pipe) send(ctx context.Context, sql string, args ...any) (pgx.BatchResults, error) {
	b, whats := p.waiting, p.whats
	p.waiting, p.whats = pgx.Batch{}, nil
	if sql != "" {
		b.Queue(sql, args...)
	}
	br := p.conn.SendBatch(ctx, &b)
	for _, what := range whats {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return br, nil
}

// commit sends the waiting writes and COMMIT in one round trip. A COMMIT the
// server answers with ROLLBACK (the transaction had failed) is
// pgx.ErrTxCommitRollback.
func (p *pipe) commit(ctx context.Context) error {
	tag, err := p.Exec(ctx, "COMMIT")
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return err
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(p.whats) == 0 {
		return p.conn.Exec(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(p.whats) == 0 {
		return p.conn.QueryRow(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return batchRow{br.QueryRow(), br}
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(p.whats) == 0 {
		return p.conn.Query(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the last statement's row of a batch; Scan closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the last statement's rows of a batch; Close closes the batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.closed = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closed
}
