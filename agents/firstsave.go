package agents

import (
	"context"
	"fmt"
)

// firstSave is a new run's first checkpoint (the first step boundary, DESIGN.md
// §8) while it is being stored. It is stored beside the first model request
// rather than before it, so the event -> model request path of DESIGN.md §7 holds
// no commit of its own; the run waits for it before anything the run does can be
// seen or stored after it: the first streamed text, and the first model call's
// answer (its ledger entry, run event, tool calls and next checkpoint). A run
// killed before it is stored has done nothing visible and core starts it again
// from the beginning, as before; a run that cannot store it does not go on.
type firstSave struct {
	ctx  context.Context // the run's: a refusal after it ended is no warning
	done chan error      // buffered 1: the goroutine never blocks
	err  error
	over bool // done was read
}

// saveFirst snapshots the run now and starts storing the snapshot through
// RunEnv.Checkpoint on a goroutine that ends with ctx or the store's answer; wait
// joins it. The snapshot is taken before saveFirst returns, so later changes to
// the run are not in it.
func (r *run) saveFirst(ctx context.Context) {
	raw, err := r.checkpointRaw()
	fs := &firstSave{ctx: ctx, done: make(chan error, 1)}
	r.first = fs
	if err != nil {
		fs.done <- err
		return
	}
	go func() { fs.done <- r.job.Env.Checkpoint(ctx, raw) }()
}

// waitFirst waits for the first checkpoint, once, and returns its error (every
// call returns the same); nil when the run saved none this way.
func (r *run) waitFirst() error {
	fs := r.first
	if fs == nil {
		return nil
	}
	if !fs.over {
		fs.err, fs.over = <-fs.done, true
		if fs.err != nil {
			r.warnUnlessStopped(fs.ctx, "checkpoint run", "run", r.job.Run.ID, "err", fs.err)
			fs.err = fmt.Errorf("save the run's first checkpoint: %w", fs.err)
		}
	}
	return fs.err
}
