package telegram

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"openbot/core"
)

// clickUpdate is a callback_query update: user clicks a button with data on the
// bot's message 1000 in chat.
func clickUpdate(id string, user int64, chat int64, data string) []byte {
	chatType := "private"
	if chat < 0 {
		chatType = "supergroup"
	}
	b, _ := json.Marshal(map[string]any{"callback_query": map[string]any{
		"id":   id,
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "Carol", "last_name": "Chen", "username": "carol_c"},
		"message": map[string]any{
			"message_id": 1000, "date": 1767225790, "text": "May I run this?",
			"from": map[string]any{"id": botID, "is_bot": true, "first_name": "Bridge Bot", "username": botUsername},
			"chat": map[string]any{"id": chat, "type": chatType},
		},
		"chat_instance": "-7000000000000000001",
		"data":          data,
	}})
	return b
}

func decided(q core.Question) core.Question {
	q.Status, q.Choice, q.AnsweredBy, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "telegram:100000001", "Alice"
	return q
}

// TestCallbackQueryAnswers: a click is passed to Engine.Answer with the clicker and
// the button's token and index, and answerCallbackQuery tells the clicker the
// outcome; a click from a user who may not DM the bot is still only the approver
// check's business and is never ingested as a message.
func TestCallbackQueryAnswers(t *testing.T) {
	ask := core.Question{Token: qToken, Kind: core.QuestionAsk, Bot: "bot:engineer", Choices: []string{"main", "dev"}}
	tests := []struct {
		name      string
		data      string
		res       core.AnswerResult
		wantToken string
		wantIdx   int
		text      string
		alert     bool
	}{
		{"approve", "q:" + qToken + ":0", core.AnswerResult{Outcome: core.AnswerAccepted, Question: approval()}, qToken, 0, "Approved", false},
		{"reject", "q:" + qToken + ":1", core.AnswerResult{Outcome: core.AnswerAccepted, Question: approval()}, qToken, 1, "Rejected", false},
		{"choice", "q:" + qToken + ":1", core.AnswerResult{Outcome: core.AnswerAccepted, Question: ask}, qToken, 1, "Answer recorded", false},
		{"forbidden", "q:" + qToken + ":0", core.AnswerResult{Outcome: core.AnswerForbidden, Question: approval()}, qToken, 0, "Only approvers of @engineer can answer this.", true},
		{"decided", "q:" + qToken + ":1", core.AnswerResult{Outcome: core.AnswerDecided, Question: decided(approval())}, qToken, 1, "Already decided: Approved by Alice", true},
		{"unknown", "q:zzzzzzzzzzzz:0", core.AnswerResult{Outcome: core.AnswerUnknown}, "zzzzzzzzzzzz", 0, "This question is no longer open.", false},
		{"foreign data", "approve:run-17", core.AnswerResult{}, "", 0, "This question is no longer open.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.eng.setAnswer(func(core.Answer) (core.AnswerResult, error) { return tt.res, nil })
			a := e.adapter(t, e.options())
			// User 42 is not on allow_users and clicks in a private chat.
			id := e.push(t, clickUpdate("cb-1", 42, 42, tt.data))
			run(t, a)
			e.waitConfirmed(t, id+1)
			got := e.eng.answers.All()
			if tt.wantToken == "" {
				if len(got) != 0 {
					t.Errorf("Answer called for data %q: %+v", tt.data, got)
				}
			} else {
				want := core.Answer{Token: tt.wantToken, Choice: tt.wantIdx, Actor: "telegram:42", Name: "Carol Chen", Account: "telegram/main"}
				if len(got) != 1 || got[0] != want {
					t.Errorf("Answer calls %+v, want [%+v]", got, want)
				}
			}
			calls := e.waitCalls(t, "answerCallbackQuery", 1)
			p := calls[0].Params
			if p["callback_query_id"] != "cb-1" || p["text"] != tt.text || (p["show_alert"] == "true") != tt.alert {
				t.Errorf("answerCallbackQuery %v, want text %q alert %v", p, tt.text, tt.alert)
			}
			if c := e.srv.Calls("sendChatAction"); len(c) != 0 { // core's Working shows the resumed run
				t.Errorf("typing shown on a click: %v", c[0].Params)
			}
			if in := e.eng.ins.All(); len(in) != 0 {
				t.Errorf("a click was ingested as a message: %+v", in)
			}
			if s := e.srv.Calls("sendMessage"); len(s) != 0 {
				t.Errorf("a click got a message (DM refusal?): %v", s[0].Params)
			}
		})
	}
}

// TestCallbackOffsetAfterAnswer: the polling offset moves past a click only after
// Engine.Answer returned; a failed Answer leaves the click unconfirmed, unanswered,
// and polled again.
func TestCallbackOffsetAfterAnswer(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	id := e.push(t, clickUpdate("cb-2", aliceID, groupChat, "q:"+qToken+":0"))
	name := CursorName("main")
	var calls int
	var cursorAtAnswer []string
	e.eng.setAnswer(func(core.Answer) (core.AnswerResult, error) {
		calls++
		cursorAtAnswer = append(cursorAtAnswer, e.cursors.get(name))
		if calls == 1 {
			return core.AnswerResult{}, errors.New("store is busy")
		}
		return core.AnswerResult{Outcome: core.AnswerAccepted, Question: approval()}, nil
	})
	run(t, a)
	e.waitConfirmed(t, id+1)
	e.waitCalls(t, "answerCallbackQuery", 1)
	if got := e.eng.answers.All(); len(got) != 2 {
		t.Fatalf("%d Answer calls, want 2 (a failure, then the retry)", len(got))
	}
	next := strconv.FormatInt(id+1, 10)
	for i, c := range cursorAtAnswer {
		if c == next {
			t.Errorf("Answer call %d: offset %s was already saved", i, c)
		}
	}
	if got := e.cursors.get(name); got != next {
		t.Errorf("offset %q, want %q", got, next)
	}
	if n := len(e.srv.Calls("answerCallbackQuery")); n != 1 {
		t.Errorf("%d answerCallbackQuery calls, want 1 (none for the failed attempt)", n)
	}
}

// TestWebhookCallback: a click by webhook is answered 200 after Answer, and 500
// (Telegram redelivers) when Answer fails.
func TestWebhookCallback(t *testing.T) {
	e, a, hs, _ := webhookEnv(t)
	url := hs.URL + WebhookPath("main")
	run(t, a)
	started(t, e, a)
	e.eng.setAnswer(func(core.Answer) (core.AnswerResult, error) { return core.AnswerResult{}, errors.New("disk full") })
	if got := post(t, url, hookSecret, clickUpdate("cb-3", aliceID, groupChat, "q:"+qToken+":0")); got != http.StatusInternalServerError {
		t.Errorf("failed Answer: status %d, want 500", got)
	}
	e.eng.setAnswer(func(core.Answer) (core.AnswerResult, error) {
		return core.AnswerResult{Outcome: core.AnswerDecided, Question: decided(approval())}, nil
	})
	if got := post(t, url, hookSecret, clickUpdate("cb-3", aliceID, groupChat, "q:"+qToken+":0")); got != http.StatusOK {
		t.Errorf("status %d, want 200", got)
	}
	calls := e.waitCalls(t, "answerCallbackQuery", 1)
	if p := calls[0].Params; p["text"] != "Already decided: Approved by Alice" || p["show_alert"] != "true" {
		t.Errorf("answerCallbackQuery %v", p)
	}
	if got := e.eng.answers.All(); len(got) != 2 || got[1].Actor != HumanActor(aliceID) {
		t.Errorf("Answer calls %+v", got)
	}
	// A forged click without the secret never reaches Answer.
	if got := post(t, url, "wrong", clickUpdate("cb-4", aliceID, groupChat, "q:"+qToken+":0")); got != http.StatusUnauthorized {
		t.Errorf("wrong secret: status %d, want 401", got)
	}
	if got := e.eng.answers.All(); len(got) != 2 {
		t.Errorf("%d Answer calls after a forged click, want 2", len(got))
	}
}

func TestClickWithoutUserFailsClosed(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	id := e.push(t, clickUpdate("cb-5", 0, groupChat, "q:"+qToken+":0"))
	run(t, a)
	e.waitConfirmed(t, id+1)
	if got := e.eng.answers.All(); len(got) != 1 || got[0].Actor != "" {
		t.Errorf("Answer calls %+v, want one with no Actor (core refuses it)", got)
	}
}
