package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// Private notices for a click, shown by answerCallbackQuery (DESIGN.md §5).
const (
	noticeUnknown = "This question is no longer open."
	maxAlertLen   = 200 // answerCallbackQuery text limit, characters
)

// handleCallback handles an inline-button click (a callback_query update;
// DESIGN.md §5). Data that is not CallbackData("q:<token>:<index>") is answered "This
// question is no longer open." and changes nothing. Otherwise the clicker,
// "telegram:<from.id>" with their display name, is passed to Engine.Answer, which
// checks the approvers (the DM allowlist does not apply: a click is not a message
// and is never ingested) and stores the first valid answer; only then is the click
// acknowledged with answerCallbackQuery: a short toast when accepted, an alert when
// the clicker may not answer or the question was already decided. The message's
// buttons are replaced later by core's delivery lane (ResolveQuestion), so the
// acknowledgement stays within Telegram's time limit. An Answer error is returned,
// so the update is not confirmed (no offset saved, webhook 500) and comes again;
// a failed answerCallbackQuery is only logged, as the answer is already stored.
func (a *Adapter) handleCallback(ctx context.Context, q *callbackQuery) error {
	token, choice, ok := ParseCallbackData(q.Data)
	if !ok {
		a.log.Warn("button click with callback data openbot did not write; ignored", "user", q.From.ID, "bytes", len(q.Data))
		a.answerCallback(ctx, q.ID, noticeUnknown, false)
		return nil
	}
	ans := core.Answer{Token: token, Choice: choice, Account: a.account}
	if q.From.ID != 0 && !q.From.IsBot {
		ans.Actor = HumanActor(q.From.ID) // no identifiable person: core fails closed
		ans.Name = displayName(&q.From)
	}
	res, err := a.engine.Answer(ctx, ans)
	if err != nil {
		return fmt.Errorf("telegram: answer to question %s from %s: %w", token, ans.Actor, err)
	}
	level := slog.LevelInfo
	if res.Outcome == core.AnswerForbidden {
		level = slog.LevelWarn // a refused click
	}
	a.log.Log(ctx, level, "question button clicked", "token", token, "choice", choice, "user", q.From.ID, "outcome", res.Outcome)
	text, alert := CallbackNotice(res, choice)
	a.answerCallback(ctx, q.ID, text, alert)
	return nil
}

// CallbackNotice is the answerCallbackQuery text for an Answer outcome, and whether
// it is shown as an alert (a dialog the clicker must dismiss) rather than a toast:
// accepted -> "Approved" / "Rejected" / "Answer recorded"; forbidden -> alert "Only
// approvers of @bot can answer this."; already decided -> alert "Already decided:
// <decision>"; unknown -> "This question is no longer open.". Texts are cut to 200
// characters, Telegram's limit.
func CallbackNotice(res core.AnswerResult, choice int) (text string, alert bool) {
	q := res.Question
	switch res.Outcome {
	case core.AnswerAccepted:
		switch {
		case q.Kind == core.QuestionApproval && choice == core.ChoiceApprove:
			return "Approved", false
		case q.Kind == core.QuestionApproval:
			return "Rejected", false
		}
		return "Answer recorded", false
	case core.AnswerForbidden:
		bot := strings.TrimPrefix(string(q.Bot), "bot:")
		if bot == "" {
			return "Only approvers of this bot can answer this.", true
		}
		return "Only approvers of @" + bot + " can answer this.", true
	case core.AnswerDecided:
		dec := q.Decision()
		if dec == "" {
			return "Already decided.", true
		}
		return trimRunes("Already decided: "+dec, maxAlertLen), true
	}
	return noticeUnknown, false
}

// answerCallback acknowledges a click so the client stops its spinner, with text
// as a toast or an alert. Failures are logged.
func (a *Adapter) answerCallback(ctx context.Context, id, text string, alert bool) {
	p := tgbotapi.Params{"callback_query_id": id, "text": text}
	p.AddBool("show_alert", alert)
	if _, err := a.call(ctx, "answerCallbackQuery", p, requestTimeout); err != nil {
		a.log.Warn("answerCallbackQuery failed", "err", err)
	}
}
