package agents

import (
	"context"

	"openbot/core"
)

// recordStep stores what one model call leaves behind: its ledger entry, its
// run event ev and, with checkpoint, the run's checkpoint after it (a step
// boundary, DESIGN.md §8). Through core.StepRecorder they are one write, so a
// model call costs the run one commit's wait (DESIGN.md §7); an Env without it
// gets the three writes one after the other. All are best effort: a failure is
// logged, and the run goes on.
func (r *run) recordStep(ctx context.Context, u Usage, ev map[string]any, checkpoint bool) {
	sr, ok := r.job.Env.(core.StepRecorder)
	if !ok {
		r.recordCall(ctx, u, r.usage.ModelCalls)
		r.event(ctx, "model_call", ev)
		if checkpoint {
			_ = r.checkpoint(ctx)
		}
		return
	}
	s := r.callStep(u, ev)
	if checkpoint {
		raw, err := r.checkpointRaw()
		if err != nil {
			r.warnUnlessStopped(ctx, "checkpoint run", "run", r.job.Run.ID, "err", err)
		}
		s.Checkpoint = raw
	}
	if err := sr.RecordStep(ctx, s); err != nil {
		r.warnUnlessStopped(ctx, "record the model call's step", "run", r.job.Run.ID, "call", s.Call.Call, "err", err)
	}
}

// lastStep keeps the step of the model call that answered without tool calls
// for the run's Result (core.Result.Step), so core stores it in the transaction
// that settles the run, with the reply: one commit instead of two. An Env that
// is not a core.StepRecorder gets recordStep's writes instead.
func (r *run) lastStep(ctx context.Context, u Usage, ev map[string]any) {
	if _, ok := r.job.Env.(core.StepRecorder); !ok {
		r.recordStep(ctx, u, ev, true)
		return
	}
	s := r.callStep(u, ev)
	r.last = &s
}

// callStep is the step of the model call just made (number r.usage.ModelCalls)
// that used u, with its model_call event ev; no checkpoint.
func (r *run) callStep(u Usage, ev map[string]any) core.Step {
	call := r.modelCall(u, r.usage.ModelCalls)
	return core.Step{Call: &call, EventType: "model_call", Event: ev}
}
