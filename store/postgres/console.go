package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"openbot/core"
)

// Reads for the operator console (DESIGN.md §10), the questions of paused runs
// (DESIGN.md §5) and the usage ledger of cost control: each listing is an index
// range on a sequence column, so a page costs its own size.

func (r *readTx) ThreadsBefore(beforeID core.ThreadID, limit int) ([]core.Thread, error) {
	return list[core.Thread](r, "threads",
		`SELECT data FROM threads WHERE id < $1 ORDER BY id DESC LIMIT $2`, before(uint64(beforeID)), lim(limit))
}

func (r *readTx) RunsBefore(beforeID core.RunID, limit int) ([]core.Run, error) {
	return list[core.Run](r, "runs",
		`SELECT data FROM runs WHERE id < $1 ORDER BY id DESC LIMIT $2`, before(uint64(beforeID)), lim(limit))
}

func (r *readTx) ActivitiesBefore(beforeSeq uint64, limit int) ([]core.Activity, error) {
	h, err := r.horizon("activity")
	if err != nil {
		return nil, err
	}
	return list[core.Activity](r, "activities",
		`SELECT data FROM activity WHERE seq < least($1::bigint, $3::bigint) ORDER BY seq DESC LIMIT $2`, before(beforeSeq), lim(limit), h)
}

// MessagesSince returns only messages below the horizon: none it passes
// commits later.
func (r *readTx) MessagesSince(after core.MessageID, limit int) ([]core.Message, error) {
	h, err := r.horizon("messages")
	if err != nil {
		return nil, err
	}
	return list[core.Message](r, "messages",
		`SELECT data FROM messages WHERE id > $1 AND id < $3 ORDER BY id LIMIT $2`, int64(after), lim(limit), h)
}

// RunEventsSince reads run_events by pos, the store-wide order of appends,
// below the horizon; pruned events are simply absent.
func (r *readTx) RunEventsSince(after uint64, limit int) ([]core.LoggedRunEvent, error) {
	h, err := r.horizon("run_event_log")
	if err != nil {
		return nil, err
	}
	rows, err := r.tx.Query(r.ctx, `SELECT pos, data FROM run_events WHERE pos > $1 AND pos < $3 ORDER BY pos LIMIT $2`, int64(after), lim(limit), h)
	if err != nil {
		return nil, fmt.Errorf("run events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.LoggedRunEvent, error) {
		var e core.LoggedRunEvent
		var pos int64
		var data []byte
		if err := row.Scan(&pos, &data); err != nil {
			return e, err
		}
		e.Pos = uint64(pos)
		return e, jsonDecode(data, &e.RunEvent, "run event")
	})
	if err != nil {
		return nil, fmt.Errorf("run events: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Heads returns the newest activity Seq, message ID and run event position
// this transaction sees, below each one's horizon: a stream that starts there
// misses nothing that commits later.
func (r *readTx) Heads() (core.LogHeads, error) {
	var act, msg, ev int64
	ha, err := r.horizon("activity")
	if err != nil {
		return core.LogHeads{}, err
	}
	hm, err := r.horizon("messages")
	if err != nil {
		return core.LogHeads{}, err
	}
	he, err := r.horizon("run_event_log")
	if err != nil {
		return core.LogHeads{}, err
	}
	err = r.tx.QueryRow(r.ctx, `SELECT
		coalesce((SELECT max(seq) FROM activity WHERE seq < $1), 0),
		coalesce((SELECT max(id) FROM messages WHERE id < $2), 0),
		coalesce((SELECT max(pos) FROM run_events WHERE pos < $3), 0)`, ha, hm, he).Scan(&act, &msg, &ev)
	if err != nil {
		return core.LogHeads{}, fmt.Errorf("heads: %w", err)
	}
	return core.LogHeads{Activity: uint64(act), Message: core.MessageID(msg), RunEvent: uint64(ev)}, nil
}

func (r *readTx) Question(id core.QuestionID) (core.Question, error) {
	var q core.Question
	err := r.one(&q, fmt.Sprintf("question %d", id), `SELECT data FROM questions WHERE id = $1`, int64(id))
	return q, err
}

func (r *readTx) QuestionByToken(token string) (core.Question, error) {
	var q core.Question
	err := r.one(&q, fmt.Sprintf("question token %q", token), `SELECT data FROM questions WHERE token = $1`, token)
	return q, err
}

func (r *readTx) Questions(pendingOnly bool, limit int) ([]core.Question, error) {
	return list[core.Question](r, "questions",
		`SELECT data FROM questions WHERE pending OR NOT $1 ORDER BY id LIMIT $2`, pendingOnly, lim(limit))
}

// UsageTotal returns the zero total for a scope nothing was counted toward.
func (r *readTx) UsageTotal(scope string) (core.UsageTotal, error) {
	var t core.UsageTotal
	err := r.one(&t, fmt.Sprintf("usage total %q", scope), `SELECT data FROM usage_totals WHERE scope = $1`, scope)
	if errors.Is(err, core.ErrNotFound) {
		return core.UsageTotal{}, nil
	}
	return t, err
}

// UsageEntries returns only entries below the horizon.
func (r *readTx) UsageEntries(after uint64, limit int) ([]core.UsageEntry, error) {
	h, err := r.horizon("usage")
	if err != nil {
		return nil, err
	}
	return list[core.UsageEntry](r, "usage entries",
		`SELECT data FROM usage WHERE seq > $1 AND seq < $3 ORDER BY seq LIMIT $2`, int64(after), lim(limit), h)
}
