package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"openbot/core"
)

var _ core.QuestionAdapter = (*Adapter)(nil)

// PostQuestion prints a question with its id and how to answer it (DESIGN.md §5):
// for an approval the warnings about the call, the tool with its command (or
// arguments as JSON) whole, what the call can reach, and "/approve N" and
// "/reject N"; for ask_human "/answer N TEXT" (or a choice's number).
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	q := d.Question
	var b strings.Builder
	fmt.Fprintf(&b, "❓ question %d: %s", q.ID, q.Text)
	if q.Kind == core.QuestionApproval {
		p := q.Prompt()
		for _, w := range p.Warnings {
			fmt.Fprintf(&b, "\n   ⚠ %s", w)
		}
		fmt.Fprintf(&b, "\n   tool %s, %s:\n     %s", p.Tool, strings.ToLower(p.Label), strings.ReplaceAll(p.Body, "\n", "\n     "))
		if p.Reach != "" {
			fmt.Fprintf(&b, "\n   reach: %s", p.Reach)
		}
		fmt.Fprintf(&b, "\n   /approve %d · /reject %d", q.ID, q.ID)
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

// answer runs /approve [N], /reject [N] and /answer [N] TEXT. Without N it takes
// the only question of the current thread waiting for that command (an approval
// for /approve and /reject, an ask for /answer); with none or several it refuses
// and lists the waiting ones, so a bare /approve never approves something the
// person did not see. For /answer a leading number is the question id only when
// a question with that id is waiting and text follows it; otherwise the whole
// argument is the answer ("/answer 2" picks choice 2).
func (a *Adapter) answer(ctx context.Context, cmd, arg string) {
	pending, err := a.engine.Questions(ctx, true)
	if err != nil {
		a.notice("cannot read questions: %v", err)
		return
	}
	byID := func(id core.QuestionID) *core.Question {
		for i := range pending {
			if pending[i].ID == id {
				return &pending[i]
			}
		}
		return nil
	}
	var id core.QuestionID
	first, rest, _ := strings.Cut(arg, " ")
	n, nerr := strconv.ParseUint(first, 10, 64)
	switch {
	case cmd != "/answer" && arg != "" && (nerr != nil || n == 0 || strings.TrimSpace(rest) != ""):
		a.notice("%q is not a question number; use %s N, or %s alone for the newest question", arg, cmd, cmd)
		return
	case cmd != "/answer" && arg != "":
		id = core.QuestionID(n)
	case cmd == "/answer" && nerr == nil && strings.TrimSpace(rest) != "" && byID(core.QuestionID(n)) != nil:
		id, arg = core.QuestionID(n), strings.TrimSpace(rest)
	case cmd == "/answer" && nerr == nil && strings.TrimSpace(rest) != "" && a.questionExists(ctx, core.QuestionID(n)):
		a.explainNotPending(ctx, core.QuestionID(n))
		return
	}
	var q *core.Question
	if id != 0 {
		q = byID(id)
		if q == nil {
			a.explainNotPending(ctx, id)
			return
		}
	} else if q = a.onlyWaiting(ctx, cmd, pending); q == nil {
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
		a.notice("not allowed: you are not an approver of question %d", q.ID)
	case res.Outcome == core.AnswerDecided:
		a.notice("question %d was already decided: %s", q.ID, res.Question.Decision())
	case res.Outcome == core.AnswerUnknown:
		a.notice("question %d is not waiting for that answer", q.ID)
	}
}

// onlyWaiting is the one question of the current thread that cmd answers without
// a number; with none or several it prints why and the waiting questions, and
// returns nil.
func (a *Adapter) onlyWaiting(ctx context.Context, cmd string, pending []core.Question) *core.Question {
	cur := a.currentThread()
	var here []core.Question
	for _, q := range pending {
		if q.Thread == cur && cur != 0 && (q.Kind == core.QuestionApproval) == (cmd != "/answer") {
			here = append(here, q)
		}
	}
	what := "approval"
	if cmd == "/answer" {
		what = "question"
	}
	switch {
	case len(here) == 1:
		return &here[0]
	case len(here) > 1:
		var b strings.Builder
		for _, q := range here {
			b.WriteString(questionLine(q))
		}
		a.notice("%d %ss are waiting in this thread; say which with %s N:%s", len(here), what, cmd, b.String())
	default:
		where := "in this thread"
		if cur == 0 {
			where = "yet: this console has no current thread"
		}
		a.printQuestions(ctx, false, fmt.Sprintf("no %s is waiting %s; say which with %s N:", what, where, cmd))
	}
	return nil
}

// questionExists reports whether any question, waiting or decided, has id.
func (a *Adapter) questionExists(ctx context.Context, id core.QuestionID) bool {
	all, err := a.engine.Questions(ctx, false)
	if err != nil {
		return false
	}
	for _, q := range all {
		if q.ID == id {
			return true
		}
	}
	return false
}

// explainNotPending says why question id (0: any) cannot be answered: none is
// waiting, it does not exist, or it was decided already.
func (a *Adapter) explainNotPending(ctx context.Context, id core.QuestionID) {
	if id == 0 {
		a.notice("no question is waiting for an answer")
		return
	}
	all, err := a.engine.Questions(ctx, false)
	if err == nil {
		for _, q := range all {
			if q.ID == id {
				a.notice("question %d was already decided: %s", id, q.Decision())
				return
			}
		}
	}
	a.notice("there is no question %d; /questions lists the waiting ones", id)
}

// listQuestions prints the questions waiting in this console's threads, as at
// start-up after a restart and for /questions.
func (a *Adapter) listQuestions(ctx context.Context, quietIfNone bool) {
	a.printQuestions(ctx, quietIfNone, "waiting for your answer:")
}

// printQuestions prints the pending questions of this console's threads under header.
func (a *Adapter) printQuestions(ctx context.Context, quietIfNone bool, header string) {
	pending, err := a.engine.Questions(ctx, true)
	if err != nil {
		a.notice("cannot read questions: %v", err)
		return
	}
	threads, err := a.engine.Threads(ctx, 0)
	if err != nil {
		a.notice("cannot list threads: %v", err)
		return
	}
	mine := map[core.ThreadID]bool{}
	for _, t := range threads {
		if a.bound(t) {
			mine[t.ID] = true
		}
	}
	var b strings.Builder
	for _, q := range pending {
		if mine[q.Thread] {
			b.WriteString(questionLine(q))
		}
	}
	switch {
	case b.Len() > 0:
		a.notice("%s%s", header, b.String())
	case !quietIfNone:
		a.notice("no question is waiting for an answer")
	}
}

// questionLine is one waiting question as listed: "\n  question N in thread #T
// (bot): text  → how to answer".
func questionLine(q core.Question) string {
	how := fmt.Sprintf("/answer %d TEXT", q.ID)
	if q.Kind == core.QuestionApproval {
		how = fmt.Sprintf("/approve %d or /reject %d", q.ID, q.ID)
	}
	return fmt.Sprintf("\n  question %d in thread #%d (%s): %s  → %s", q.ID, q.Thread, strings.TrimPrefix(string(q.Bot), "bot:"), firstLineOf(q.Text), how)
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 100 {
		return string(r[:99]) + "…"
	}
	return s
}
