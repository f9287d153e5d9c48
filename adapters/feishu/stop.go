package feishu

import (
	"context"
	"fmt"

	"openbot/core"
)

// handleStop answers /stop (DESIGN.md §10): the engine (core.Stopper) stops the
// bots' work in the thread of in when its sender is an approver of it (or, with
// none configured, asked for the work); the outcome is a plain reply to the
// command (in a group, in its topic thread). No model is called; the thread
// itself gets core's notice naming who stopped the work. Only store failures
// are returned, so the event is retried.
func (a *Adapter) handleStop(ctx context.Context, in core.Inbound, messageID string, inThread bool) error {
	s, ok := a.engine.(core.Stopper)
	if !ok {
		a.queueNotice(messageID, "Stopping is not available here.", inThread)
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, ingestTimeout)
	defer cancel()
	res, err := s.Stop(sctx, core.StopRequest{ThreadKey: in.ThreadKey, Actor: in.SenderID,
		Name: a.senderName(ctx, string(in.SenderID)), Account: a.account})
	if err != nil {
		return fmt.Errorf("feishu: /stop of %s: %w", messageID, err)
	}
	a.log.Info("feishu /stop", "message_id", messageID, "sender", in.SenderID, "outcome", res.Outcome)
	a.queueNotice(messageID, core.StopReply(res), inThread)
	return nil
}
