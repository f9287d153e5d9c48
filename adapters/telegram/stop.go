package telegram

import (
	"context"
	"fmt"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// handleStop answers /stop (DESIGN.md §10): the engine (core.Stopper) stops the
// bots' work in the conversation's current thread when the sender is an
// approver of it (or, with none configured, asked for the work), and the
// outcome is a plain reply to the command (Telegram has no private message in a
// group). In a group only "/stop@this_bot" reaches here. No model is called; the
// thread itself gets core's notice naming who stopped the work. Only store
// failures are returned, so the update is retried.
func (a *Adapter) handleStop(ctx context.Context, me tgbotapi.User, m *message, conv Conversation) error {
	s, ok := a.engine.(core.Stopper)
	if !ok {
		a.reply(ctx, conv, m.MessageID, "Stopping is not available here.")
		return nil
	}
	res, err := s.Stop(ctx, core.StopRequest{ThreadKey: conv.ThreadKey(me.ID), Actor: HumanActor(m.From.ID),
		Name: displayName(m.From), Account: a.account})
	if err != nil {
		return fmt.Errorf("telegram: /stop in %d: %w", conv.Chat, err)
	}
	a.log.Info("telegram /stop", "chat", conv.Chat, "user", m.From.ID, "outcome", res.Outcome)
	a.reply(ctx, conv, m.MessageID, core.StopReply(res))
	return nil
}
