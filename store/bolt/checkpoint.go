package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"openbot/core"
	"openbot/store/check"
)

// Run checkpoints (schema version 8): run_checkpoints holds RunID BE -> the
// run's Checkpoint bytes, and the runs record holds the run without them. The
// checkpoint is the agent's whole transcript (DESIGN.md §8), rewritten after
// every step, while the rest of the run changes with every status and usage
// update: kept apart, those updates neither decode nor re-encode nor re-put the
// transcript, and a step puts its bytes as they are, checked once, instead of
// encoding them into the record.

// runRecord is what PutRun reads of the stored record it replaces.
type runRecord struct {
	Status core.RunStatus `json:"status"`
}

// encodeRun is the runs record of r: r without its Checkpoint.
func encodeRun(r core.Run) ([]byte, error) {
	r.Checkpoint = nil
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode runs record: %w", err)
	}
	return data, nil
}

// decodeRun decodes the runs record v under key k and fills Checkpoint with a
// copy of the run_checkpoints entry (bbolt values live only as long as the
// transaction); without an entry the run has no checkpoint.
func (r *readTx) decodeRun(k, v []byte) (core.Run, error) {
	var run core.Run
	if err := json.Unmarshal(v, &run); err != nil {
		return run, fmt.Errorf("run %d: decode: %w", decodeU64(k), err)
	}
	return r.withCheckpoint(k, run), nil
}

// withCheckpoint is run with a copy of its run_checkpoints entry under key k.
func (r *readTx) withCheckpoint(k []byte, run core.Run) core.Run {
	if cp := r.bucket(bktRunCheckpoints).Get(k); len(cp) > 0 {
		run.Checkpoint = append(json.RawMessage(nil), cp...)
	}
	return run
}

// checkpointChanged reports whether PutRun of run id must write cp to
// run_checkpoints: not when it equals the stored bytes (for a new run, id 0,
// nothing is stored). A non-empty cp that changed must be valid JSON: the store
// refuses a broken transcript before writing anything, as it did when the
// checkpoint was encoded into the record. Only changed bytes are scanned.
func (w *writeTx) checkpointChanged(id core.RunID, cp json.RawMessage) (bool, error) {
	stored := w.bucket(bktRunCheckpoints).Get(u64(uint64(id)))
	switch {
	case len(cp) == 0:
		return stored != nil, nil
	case bytes.Equal(stored, cp):
		return false, nil
	case !json.Valid(cp):
		return false, check.Invalid("run %d: checkpoint is not valid JSON", id)
	}
	return true, nil
}

// putCheckpoint stores cp as the checkpoint of the run under key; an empty cp
// deletes it. bbolt keeps the value slice until commit, so it puts a copy the
// caller cannot change.
func (w *writeTx) putCheckpoint(key []byte, cp json.RawMessage) error {
	b := w.bucket(bktRunCheckpoints)
	if len(cp) == 0 {
		return b.Delete(key)
	}
	return b.Put(key, bytes.Clone(cp))
}

// migrate7to8 moves each run's checkpoint out of its runs record into
// run_checkpoints and rewrites the record without it. Only records that hold
// a checkpoint are rewritten (settled runs keep none), collected first since
// bbolt forbids changing a bucket while ForEach walks it.
func migrate7to8(tx *bbolt.Tx) error {
	cps, err := tx.CreateBucketIfNotExists(bktRunCheckpoints)
	if err != nil {
		return err
	}
	runs := tx.Bucket(bktRuns)
	if runs == nil {
		return fmt.Errorf("version 7 file without %s bucket", bktRuns)
	}
	var moved []core.Run
	err = runs.ForEach(func(k, v []byte) error {
		var r core.Run
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("run %d: decode: %w", decodeU64(k), err)
		}
		if len(r.Checkpoint) > 0 {
			moved = append(moved, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range moved {
		key := u64(uint64(r.ID))
		data, err := encodeRun(r)
		if err != nil {
			return fmt.Errorf("run %d: %w", r.ID, err)
		}
		if err := errors.Join(cps.Put(key, r.Checkpoint), runs.Put(key, data)); err != nil {
			return fmt.Errorf("run %d: %w", r.ID, err)
		}
	}
	return nil
}

// runCheckpoints checks that no runs record holds a checkpoint and that every
// run_checkpoints entry belongs to a stored run and is valid JSON.
func (v *verifier) runCheckpoints() {
	runs := v.tx.Bucket(bktRuns)
	_ = v.tx.Bucket(bktRunCheckpoints).ForEach(func(k, val []byte) error {
		switch {
		case len(k) != 8:
			v.fail("run_checkpoints: bad key %x", k)
		case runs.Get(k) == nil:
			v.fail("run_checkpoints: checkpoint of run %d, which does not exist", decodeU64(k))
		case !json.Valid(val):
			v.fail("run_checkpoints: checkpoint of run %d is not valid JSON", decodeU64(k))
		}
		return nil
	})
}
