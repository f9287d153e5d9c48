package agents

import (
	"context"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// recordAsync stores a model call's ledger entry (recordCall) and its run event
// (event) on two goroutines and returns at once; the caller Waits before the
// run's next step. Both are best effort (a failure is logged) and each is a
// commit of its own when made one after the other; made beside each other and
// beside the step's checkpoint they share the store's group commits (DESIGN.md
// §7), so a model call's writes cost the run one commit's wait instead of three.
// Everything they read is fixed before recordAsync returns: the call number is
// r.usage.ModelCalls now, ev is not changed by the caller afterwards.
func (r *run) recordAsync(ctx context.Context, u openai.Usage, ev map[string]any) *sync.WaitGroup {
	var wg sync.WaitGroup
	calls := r.usage.ModelCalls
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.recordCall(ctx, u, calls)
	}()
	go func() {
		defer wg.Done()
		r.event(ctx, "model_call", ev)
	}()
	return &wg
}
