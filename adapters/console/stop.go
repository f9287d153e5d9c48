package console

import (
	"context"
	"errors"

	"openbot/core"
)

// stop runs /stop (DESIGN.md §10): the engine (core.Stopper) stops the bots' work
// in the current thread when the person at the terminal may (an approver of the
// thread or, with none configured, who asked for the work), and the outcome is
// printed. No model is called; the thread gets core's notice naming who stopped
// the work. After /new there is no current thread yet, so there is nothing to stop.
func (a *Adapter) stop(ctx context.Context) {
	s, ok := a.engine.(core.Stopper)
	if !ok {
		a.notice("stopping is not available here")
		return
	}
	req := core.StopRequest{Thread: a.currentThread(), Actor: Human, Name: "you", Account: a.account}
	a.mu.Lock()
	fresh := a.fresh
	a.mu.Unlock()
	if req.Thread == 0 && !fresh {
		req.ThreadKey = a.ThreadKey()
	}
	res, err := s.Stop(ctx, req)
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return
		}
		a.log.Warn("console /stop failed", "err", err)
		a.notice("not stopped: %v", err)
		return
	}
	a.notice("%s", core.StopReply(res))
}
