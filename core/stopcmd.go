package core

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// /stop in chat (DESIGN.md §10): a person stops the bots' work in the thread
// they typed it in. Only an owner or an approver of that thread may: the approvers
// configured for the bot, else the global approvers, else (none configured) the
// people who asked for the work (the same rule as approving, core/approvers.go).
// It is answered without a model call.

// Stopper is implemented by the engine: adapters find it on their engine by type
// assertion, so an engine without it (a test's fake) still serves them. Stop
// never blocks on a platform; it is one store transaction.
type Stopper interface {
	Stop(ctx context.Context, req StopRequest) (StopResult, error)
}

var _ Stopper = (*Engine)(nil)

// StopRequest is a /stop typed in chat.
type StopRequest struct {
	// Thread is the openbot thread, when the adapter knows it; else ThreadKey
	// finds it (the thread that key is bound to now).
	Thread    ThreadID
	ThreadKey string
	// Actor and Name are who typed it; Account the account it came through.
	Actor   ActorID
	Name    string
	Account AccountID
}

// StopOutcome is what a /stop did.
type StopOutcome int

// Stop outcomes.
const (
	// StopDone: the work of at least one bot was stopped (StopResult says what).
	StopDone StopOutcome = iota
	// StopNothing: no bot has work in the thread (or there is no thread).
	StopNothing
	// StopForbidden: the person may not stop any of the work there; nothing changed.
	StopForbidden
)

// StopResult is the outcome of Stop: the bots stopped and what was cancelled.
type StopResult struct {
	Outcome StopOutcome
	Bots    []string
	Stopped Stopped
}

// StopReply is the short plain text an adapter answers a /stop with, privately
// where the platform allows. It reveals no more than the person may know.
func StopReply(r StopResult) string {
	switch r.Outcome {
	case StopDone:
		return "Stopped the work of @" + strings.Join(r.Bots, ", @") + " in this thread."
	case StopForbidden:
		return "Sorry, only an approver of this thread (or the person who asked for the work) can stop it."
	}
	return "Nothing to stop in this thread."
}

// Stop carries out a /stop: for every bot with a run that has not ended or with
// queued items in the thread, when req.Actor may stop it, its runs there are
// cancelled (CancelRun's effects, the notice included) and its queued items
// dropped, in one transaction. Errors are store failures.
func (e *Engine) Stop(ctx context.Context, req StopRequest) (StopResult, error) {
	return e.control.stop(ctx, req)
}

// stop is Engine.Stop.
func (ct *control) stop(ctx context.Context, req StopRequest) (StopResult, error) {
	var res StopResult
	var woken []string
	by := By{Actor: req.Actor, Name: req.Name, Via: req.Account}
	err := ct.e.store.Update(ctx, func(tx Tx) error {
		res, woken = StopResult{Outcome: StopNothing}, nil
		id := req.Thread
		if id == 0 && req.ThreadKey != "" {
			var err error
			if id, err = tx.ThreadByKey(req.ThreadKey); errors.Is(err, ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if id == 0 {
			return nil
		}
		work, err := ct.workInThreadTx(tx, id)
		if err != nil {
			return err
		}
		for _, bot := range sortedBots(work) {
			if len(work[bot]) == 0 && !hasQueued(tx, bot, id) {
				continue
			}
			ok, err := ct.mayStopTx(tx, bot, id, work[bot], req.Actor)
			if err != nil {
				return err
			}
			if !ok {
				if res.Outcome == StopNothing {
					res.Outcome = StopForbidden
				}
				continue
			}
			st, w, err := ct.stopBotTx(tx, bot, id, by)
			if err != nil {
				return err
			}
			res.Outcome = StopDone
			res.Bots = append(res.Bots, strings.TrimPrefix(string(bot), "bot:"))
			res.Stopped.Runs = append(res.Stopped.Runs, st.Runs...)
			res.Stopped.Items += st.Items
			woken = append(woken, w...)
		}
		return nil
	})
	if err != nil {
		return StopResult{}, err
	}
	for _, b := range res.Bots {
		ct.afterCancel(nil, nil, BotActorID(b))
	}
	ct.afterCancel(res.Stopped.Runs, woken, "")
	return res, nil
}

// workInThreadTx maps every configured bot to its runs in thread that have not
// ended (possibly none).
func (ct *control) workInThreadTx(tx ReadTx, thread ThreadID) (map[ActorID][]Run, error) {
	runs, err := activeRunsTx(tx, "", thread)
	if err != nil {
		return nil, err
	}
	out := map[ActorID][]Run{}
	for _, b := range ct.e.Bots() {
		out[b.ID()] = nil
	}
	for _, r := range runs {
		out[r.Bot] = append(out[r.Bot], r)
	}
	return out, nil
}

func sortedBots(m map[ActorID][]Run) []ActorID {
	out := make([]ActorID, 0, len(m))
	for b := range m {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

func hasQueued(tx ReadTx, bot ActorID, thread ThreadID) bool {
	q, err := tx.QueuedInThread(bot, thread)
	return err == nil && len(q) > 0
}

// mayStopTx reports whether actor may stop bot's work in thread: a configured
// approver of the bot (its own, else the global ones); with none configured,
// one of the people who asked for that work (the triggers of its runs and of
// its queued items). An empty or bot actor fails closed.
func (ct *control) mayStopTx(tx ReadTx, bot ActorID, thread ThreadID, runs []Run, actor ActorID) (bool, error) {
	if !human(actor) {
		return false, nil
	}
	d, err := loadPeopleTx(tx)
	if err != nil {
		return false, err
	}
	if ct.e.ownerIn(&d, actor) {
		return true, nil
	}
	mine := d.identities(actor)
	pol, err := ct.e.threadPolicyByIDTx(tx, thread)
	if err != nil {
		return false, err
	}
	if approvers := ct.e.questions.approversFor(Question{Bot: bot, Kind: QuestionAsk}, pol.Approvers); approvers != nil {
		return anyIn(mine, approvers), nil
	}
	var ids []MessageID
	for _, r := range runs {
		ids = append(ids, r.Triggers...)
	}
	queued, err := tx.QueuedInThread(bot, thread)
	if err != nil {
		return false, err
	}
	for _, it := range queued {
		if it.Kind == ItemMessage {
			ids = append(ids, it.Message)
		}
	}
	triggers, err := messagesTx(tx, ids)
	if err != nil {
		return false, err
	}
	askers, err := askersTx(tx, triggers)
	if err != nil {
		return false, err
	}
	return anyIn(mine, askers), nil
}
