package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"openbot/core"
)

var _ core.QuestionAdapter = (*Adapter)(nil)

// PostQuestion prints a question with its id and how to answer it (issue 7 item 2):
// "/approve N" and "/reject N" for an approval, "/answer N TEXT" (or a choice's
// number) for ask_human.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	q := d.Question
	var b strings.Builder
	fmt.Fprintf(&b, "❓ question %d: %s", q.ID, q.Text)
	if q.Kind == core.QuestionApproval {
		args := string(q.Args)
		if r := []rune(args); len(r) > 600 {
			args = string(r[:600]) + "…"
		}
		fmt.Fprintf(&b, "\n   tool %s %s\n   /approve %d · /reject %d", q.Tool, args, q.ID, q.ID)
	} else if len(q.Choices) > 0 {
		for i, c := range q.Choices {
			fmt.Fprintf(&b, "\n   %d. %s", i+1, c)
		}
		fmt.Fprintf(&b, "\n   /answer %d <number or text>", q.ID)
	} else {
		fmt.Fprintf(&b, "\n   /answer %d <text>, or just type your reply", q.ID)
	}
	return a.Deliver(ctx, core.Delivery{Outbox: d.Outbox, Thread: q.Thread, Conversation: d.Conversation, Sender: d.Sender, Text: b.String()})
}

// ResolveQuestion prints the decision; a terminal cannot take buttons back.
func (a *Adapter) ResolveQuestion(ctx context.Context, d core.QuestionDelivery) error {
	_, err := a.Deliver(ctx, core.Delivery{Outbox: d.Outbox, Thread: d.Question.Thread, Conversation: d.Conversation,
		Sender: core.Sender{Name: "system"}, Text: fmt.Sprintf("question %d: %s", d.Question.ID, d.Question.Decision())})
	return err
}

// answer runs /approve, /reject and /answer: "[id] [text]", the id defaulting to
// the newest pending question.
func (a *Adapter) answer(ctx context.Context, cmd, arg string) {
	var id core.QuestionID
	first, rest, _ := strings.Cut(arg, " ")
	if n, err := strconv.ParseUint(first, 10, 64); err == nil && n > 0 {
		id, arg = core.QuestionID(n), strings.TrimSpace(rest)
	}
	pending, err := a.engine.Questions(ctx, true)
	if err != nil {
		a.notice("cannot read questions: %v", err)
		return
	}
	var q *core.Question
	for i := range pending {
		if id == 0 || pending[i].ID == id {
			q = &pending[i]
		}
	}
	if q == nil {
		if id == 0 {
			a.notice("no question is waiting for an answer")
		} else {
			a.notice("question %d is not waiting for an answer", id)
		}
		return
	}
	ans := core.Answer{Question: q.ID, Choice: -1, Actor: Human, Name: "you", Account: a.account}
	switch cmd {
	case "/approve", "/reject":
		if q.Kind != core.QuestionApproval {
			a.notice("question %d asks for an answer: /answer %d TEXT", q.ID, q.ID)
			return
		}
		ans.Choice = core.ChoiceApprove
		if cmd == "/reject" {
			ans.Choice = core.ChoiceReject
		}
	default: // /answer
		if q.Kind == core.QuestionApproval {
			a.notice("question %d is an approval: /approve %d or /reject %d", q.ID, q.ID, q.ID)
			return
		}
		if arg == "" {
			a.notice("usage: /answer [N] TEXT")
			return
		}
		ans.Text = arg
		for i, c := range q.Choices {
			if strings.EqualFold(arg, c) || arg == strconv.Itoa(i+1) {
				ans.Choice, ans.Text = i, ""
			}
		}
		if ans.Choice < 0 && len(q.Choices) > 0 {
			a.notice("answer with one of the choices of question %d (its number or text)", q.ID)
			return
		}
	}
	res, err := a.engine.Answer(ctx, ans)
	switch {
	case err != nil:
		a.notice("answer not recorded: %v", err)
	case res.Outcome == core.AnswerForbidden:
		a.notice("you are not an approver of question %d", q.ID)
	case res.Outcome == core.AnswerDecided:
		a.notice("question %d was already decided: %s", q.ID, res.Question.Decision())
	case res.Outcome == core.AnswerUnknown:
		a.notice("question %d is not waiting for that answer", q.ID)
	}
}
