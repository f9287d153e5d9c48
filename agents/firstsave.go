package agents

import (
	"context"
	"fmt"

	"openbot/core"
)

// holdFirst hands over a new run's first checkpoint, the first step boundary
// before its first model call (DESIGN.md §8). Core's RunEnv holds it
// (core.CheckpointHolder) and stores it only if the run is about to be seen before
// its first step is stored (its first streamed text), so the event -> model
// request path of DESIGN.md §7 holds no commit of its own and a run answered
// before it streams anything never stores it. Any other Env stores it here,
// before the first model request; a run that cannot store it does not go on. A
// run killed before it is stored has done nothing visible, and core starts it
// again from the beginning.
func (r *run) holdFirst(ctx context.Context) error {
	raw, err := r.checkpointRaw()
	if err != nil {
		return fmt.Errorf("save the run's first checkpoint: %w", err)
	}
	if h, ok := r.job.Env.(core.CheckpointHolder); ok {
		h.HoldCheckpoint(raw)
		return nil
	}
	if err := r.job.Env.Checkpoint(ctx, raw); err != nil {
		r.warnUnlessStopped(ctx, "checkpoint run", "run", r.job.Run.ID, "err", err)
		return fmt.Errorf("save the run's first checkpoint: %w", err)
	}
	return nil
}
