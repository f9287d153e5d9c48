package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Questions (seed §7, DESIGN.md §5): a run pauses with a question, the thread is
// parked for its bot, the question is shown on every binding, the first authorized
// answer wins and resumes the run under the same id.

// questions is the engine's part for questions and approvals: it pauses runs
// with a question, takes answers (by button or by reply), expires what waits
// too long, decides who may answer (core/approvers.go) and records what became
// of approved calls (core/outcome.go). Its state is the store's questions and
// the expiry interval.
type questions struct {
	e           *Engine
	expiryEvery time.Duration // how often pending questions are checked for expiry
}

// pauseTx settles a run that returned Result.Pause: the question is stored with the
// checkpoint, the run waits for a person, and one OpQuestion outbox entry per
// binding shows it.
func (qs *questions) pauseTx(tx Tx, job *Job, r *Run, t *Thread, res Result) error {
	p := res.Pause
	if len(res.Checkpoint) == 0 {
		return errors.New("agent paused without a checkpoint")
	}
	now := qs.e.clock.Now()
	token, err := newToken(tx)
	if err != nil {
		return err
	}
	q := Question{
		Token: token, Kind: p.Kind, Run: r.ID, Bot: r.Bot, Thread: t.ID, Text: p.Text,
		Choices: p.Choices, Tool: p.Tool, Args: p.Args, CallID: p.CallID, Reach: strings.TrimSpace(p.Reach),
		Warnings: p.Warnings,
		Status:   QuestionPending, Choice: -1, Created: now, Expires: now.Add(qs.e.cfg().approvalTimeout),
	}
	if q.Askers, err = askersTx(tx, job.Triggers); err != nil {
		return err
	}
	if q.Kind == "" {
		q.Kind = QuestionAsk
	}
	if q.Kind == QuestionApproval {
		sum := sha256.Sum256(p.Args)
		q.ArgsHash = hex.EncodeToString(sum[:])
	}
	refuse := false
	if q.Kind == QuestionApproval {
		ok, err := qs.approvableTx(tx, q)
		if err != nil {
			return err
		}
		refuse = !ok
	}
	for _, b := range t.Bindings {
		if acct, ok := qs.e.router.pickAccount(b, r.Bot); ok && !refuse {
			q.Posts = append(q.Posts, QuestionPost{Account: acct, Conversation: b.Conversation})
		}
	}
	if q, err = tx.PutQuestion(q); err != nil {
		return err
	}
	replyTo := botReply(job, "").replyTo
	for _, post := range q.Posts {
		if _, err := tx.PutOutbox(OutboxEntry{Account: post.Account, Conversation: post.Conversation, Thread: t.ID,
			Op: OpQuestion, Question: q.ID, ReplyTo: replyTo[post.Conversation], Status: OutboxPending, Created: now}); err != nil {
			return err
		}
	}
	r.Status, r.Question, r.Checkpoint = RunWaitingHuman, q.ID, res.Checkpoint
	r.LeaseUntil = time.Time{} // a person's answer resumes it in any process (Owner: who ran it so far)
	if _, err := tx.PutRun(*r); err != nil {
		return err
	}
	if err := statusEventTx(tx, r.ID, now, map[string]any{"status": RunWaitingHuman, "question": q.ID, "kind": q.Kind, "tool": q.Tool, "args_hash": q.ArgsHash}); err != nil {
		return err
	}
	for _, id := range r.Items {
		it, err := tx.Item(id)
		if err != nil {
			return err
		}
		if it.Status == ItemProcessing {
			it.Status = ItemDone
			if _, err := tx.PutItem(it); err != nil {
				return err
			}
		}
	}
	qs.e.activity(tx, Activity{Event: "question.asked", Summary: fmt.Sprintf("@%s asks (%s %d): %s", job.Bot.Handle, q.Kind, q.ID, firstLine(q.Text, 120)), Thread: t.ID, Actor: r.Bot, Run: r.ID})
	if !refuse {
		return nil
	}
	// Nobody could approve it: refused now, with a notice saying how to set
	// someone up, rather than a prompt no click could answer.
	if _, err := qs.decideTx(tx, q, QuestionAnswered, ChoiceReject, "refused: nobody may approve", SystemActor, noApproverName, ""); err != nil {
		return err
	}
	_, err = qs.e.router.postTx(tx, t, postSpec{msg: systemNotice(r.ID, NoApproverNotice(job.Bot.Handle, q.Tool))})
	return err
}

// noApproverName is who "rejected" an approval nobody could give, as the
// decision and the model's tool result show it.
const noApproverName = "openbot's approval policy (nobody else may approve it)"

// newToken returns a fresh 12-character lowercase base32 token (60 random bits)
// not used by any stored question.
func newToken(tx ReadTx) (string, error) {
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	for range 8 {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		tok := strings.ToLower(enc.EncodeToString(b))[:12]
		if _, err := tx.QuestionByToken(tok); errors.Is(err, ErrNotFound) {
			return tok, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", errors.New("could not find an unused question token")
}

// Answer records a person's answer to a question (DESIGN.md §5): only from an
// authorized human, first valid answer wins, stored before anything visible
// changes. An accepted answer queues a resume item for the bot and one OpResolve
// outbox entry per post of the question. It never blocks on a platform, so an
// adapter can call it before acknowledging a click. Errors are store failures;
// refusals are outcomes.
func (e *Engine) Answer(ctx context.Context, a Answer) (AnswerResult, error) {
	return e.questions.answer(ctx, a)
}

// answer is Engine.Answer.
func (qs *questions) answer(ctx context.Context, a Answer) (AnswerResult, error) {
	var res AnswerResult
	var wake string
	err := qs.e.store.Update(ctx, func(tx Tx) error {
		wake = ""
		var q Question
		var err error
		switch {
		case a.Token != "":
			q, err = tx.QuestionByToken(a.Token)
		case a.Question != 0:
			q, err = tx.Question(a.Question)
		default:
			err = ErrNotFound
		}
		if errors.Is(err, ErrNotFound) {
			res = AnswerResult{Outcome: AnswerUnknown}
			return nil
		} else if err != nil {
			return err
		}
		res = AnswerResult{Question: q}
		if q.Status == QuestionPending && !q.Expires.IsZero() && !qs.e.clock.Now().Before(q.Expires) {
			// Past its deadline but not swept yet: it expires now, not later.
			q, err = qs.decideTx(tx, q, QuestionExpired, ChoiceReject, "expired", SystemActor, "expiry", "")
			if err != nil {
				return err
			}
			res = AnswerResult{Outcome: AnswerDecided, Question: q}
			wake = strings.TrimPrefix(string(q.Bot), "bot:")
			return nil
		}
		opts := q.Options()
		switch {
		case q.Status != QuestionPending:
			res.Outcome = AnswerDecided
			return nil
		case a.Choice >= len(opts) || a.Choice < -1 || (a.Choice == -1 && (q.Kind == QuestionApproval || strings.TrimSpace(a.Text) == "")):
			res.Outcome = AnswerUnknown
			return nil
		}
		ok, err := qs.authorizedTx(tx, q, a.Actor)
		if err != nil {
			return err
		}
		if !ok {
			res.Outcome = AnswerForbidden
			return nil
		}
		text := a.Text
		if a.Choice >= 0 {
			text = opts[a.Choice]
		}
		q, err = qs.decideTx(tx, q, QuestionAnswered, a.Choice, text, a.Actor, a.Name, a.Account)
		if err != nil {
			return err
		}
		res = AnswerResult{Outcome: AnswerAccepted, Question: q}
		wake = strings.TrimPrefix(string(q.Bot), "bot:")
		return nil
	})
	if err != nil {
		return AnswerResult{}, err
	}
	qs.e.Observe().Answer(string(res.Outcome))
	if wake != "" {
		qs.e.nudge([]string{wake})
	}
	return res, nil
}

// decideTx stores a decision (answered or expired), queues the resume item and the
// OpResolve entries, and records it in the activity log.
func (qs *questions) decideTx(tx Tx, q Question, status QuestionStatus, choice int, text string, who ActorID, name string, via AccountID) (Question, error) {
	now := qs.e.clock.Now()
	q.Status, q.Choice, q.Answer, q.AnsweredAt = status, choice, text, now
	q.AnsweredBy, q.AnsweredByName, q.AnsweredVia = who, name, via
	if q.AnsweredByName == "" {
		q.AnsweredByName = string(who)
	}
	q, err := tx.PutQuestion(q)
	if err != nil {
		return q, err
	}
	if _, err := tx.PutItem(InboxItem{Actor: q.Bot, Thread: q.Thread, Kind: ItemResume, Run: q.Run, Status: ItemQueued, Created: now}); err != nil {
		return q, err
	}
	for _, p := range q.Posts {
		if _, err := tx.PutOutbox(OutboxEntry{Account: p.Account, Conversation: p.Conversation, Thread: q.Thread,
			Op: OpResolve, Question: q.ID, Status: OutboxPending, Created: now}); err != nil {
			return q, err
		}
	}
	summary := fmt.Sprintf("question %d (%s", q.ID, q.Kind)
	if q.Tool != "" {
		summary += " of " + q.Tool + " args sha256:" + q.ArgsHash
	}
	summary += "): " + q.Decision()
	if via != "" {
		summary += " via " + string(via)
	}
	qs.e.activity(tx, Activity{Event: "question." + string(status), Summary: summary, Thread: q.Thread, Actor: who, Run: q.Run})
	return q, nil
}

// answerByReplyTx answers a pending ask_human question of the thread with a
// human's message (DESIGN.md §5): the question the message replies to, else the
// oldest one the message is meant for (it addresses no other bot or person); a
// question with choices takes only a reply equal to a choice. It returns the
// asking bot's handle, whose message item the caller then suppresses, or "".
func (qs *questions) answerByReplyTx(tx Tx, t *Thread, in Inbound, name string) (string, error) {
	pending, err := tx.Questions(true, 0)
	if err != nil {
		return "", err
	}
	pending = slices.DeleteFunc(pending, func(q Question) bool { return q.Thread != t.ID || q.Kind != QuestionAsk })
	for _, q := range pending {
		if qs.repliesTo(q, in) {
			pending = []Question{q}
			break
		}
	}
	addressed := qs.addressedBots(in)
	for _, q := range pending {
		if !qs.meantFor(q, in, addressed) {
			continue
		}
		choice := -1
		if len(q.Choices) > 0 {
			for i, c := range q.Choices {
				if strings.EqualFold(strings.TrimSpace(in.Text), strings.TrimSpace(c)) {
					choice = i
				}
			}
			if choice < 0 {
				continue
			}
		}
		ok, err := qs.authorizedTx(tx, q, in.SenderID)
		if err != nil || !ok {
			return "", err
		}
		text := in.Text
		if choice >= 0 {
			text = q.Choices[choice]
		}
		if _, err := qs.decideTx(tx, q, QuestionAnswered, choice, text, in.SenderID, name, in.Account); err != nil {
			return "", err
		}
		return strings.TrimPrefix(string(q.Bot), "bot:"), nil
	}
	return "", nil
}

// Questions lists questions, oldest first; with pendingOnly only those waiting.
// It is the audit of decisions behind `openbot approvals list`.
func (e *Engine) Questions(ctx context.Context, pendingOnly bool) ([]Question, error) {
	var out []Question
	err := e.store.View(ctx, func(tx ReadTx) error {
		var err error
		out, err = tx.Questions(pendingOnly, 0)
		return err
	})
	return out, err
}

// expire rejects every pending question past its Expires time (DESIGN.md §5): the
// run resumes with the rejection and the posts show it. It returns how many expired.
func (qs *questions) expire(ctx context.Context) (int, error) {
	now := qs.e.clock.Now()
	var due []Question
	if err := qs.e.store.View(ctx, func(tx ReadTx) error {
		due = nil // fn may run again (core.Store.View)
		pending, err := tx.Questions(true, 0)
		for _, q := range pending {
			if !q.Expires.IsZero() && !now.Before(q.Expires) {
				due = append(due, q)
			}
		}
		return err
	}); err != nil {
		return 0, err
	}
	n := 0
	for _, q := range due {
		decided := false
		err := qs.e.store.Update(ctx, func(tx Tx) error {
			decided = false // fn may run again: the last run decides
			cur, err := tx.Question(q.ID)
			if err != nil || cur.Status != QuestionPending {
				return err
			}
			_, err = qs.decideTx(tx, cur, QuestionExpired, ChoiceReject, "expired", SystemActor, "expiry", "")
			decided = err == nil
			return err
		})
		if err != nil {
			return n, err
		}
		if !decided {
			continue // answered meanwhile, or expired by another process
		}
		n++
		qs.e.Observe().Answer("expired")
		qs.e.sched.wake(strings.TrimPrefix(string(q.Bot), "bot:"))
	}
	if n > 0 {
		qs.e.lanes.kick()
	}
	return n, nil
}

// expiryLoop runs expire every expiryEvery until ctx is done.
func (qs *questions) expiryLoop(ctx context.Context) {
	t := time.NewTicker(qs.expiryEvery)
	defer t.Stop()
	for {
		if _, err := qs.expire(ctx); err != nil && ctx.Err() == nil {
			qs.e.log.Error("question expiry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PrettyArgs is an approval's arguments for people: JSON indented by two spaces,
// keys and values exactly as stored, except that the escapes \u003c, \u003e and
// \u0026 (which Go's JSON encoder writes for <, > and &) show as those characters;
// an escaped backslash before "u003e" is left alone. Text that is not JSON comes
// back as it is.
func (q Question) PrettyArgs() string {
	var b bytes.Buffer
	if json.Indent(&b, q.Args, "", "  ") != nil {
		return string(q.Args)
	}
	s := b.String()
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			out.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			if c, ok := map[string]byte{"003c": '<', "003e": '>', "0026": '&'}[strings.ToLower(s[i+2:i+6])]; ok {
				out.WriteByte(c)
				i += 5
				continue
			}
		}
		out.WriteString(s[i : i+2]) // any other escape, \\ included, stays whole
		i++
	}
	return out.String()
}
