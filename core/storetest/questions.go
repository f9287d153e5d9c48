package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"openbot/core"
)

// testQuestions: IDs, token lookup, the pending index as status changes, token
// uniqueness, and an exact round trip of every field.
func testQuestions(t *testing.T, s core.Store) {
	q1 := core.Question{
		Token: "tok1", Kind: core.QuestionApproval, Run: 1, Bot: "bot:engineer", Thread: 1,
		Text: "run shell?", Tool: "shell", Args: json.RawMessage(`{"command":"ls"}`), ArgsHash: "ab12",
		CallID: "call_1", Status: core.QuestionPending, Choice: -1, Expires: at(100), Created: at(1),
		Posts: []core.QuestionPost{{Account: "slack/acme", Conversation: "T:C:1"}},
	}
	q2 := core.Question{Token: "tok2", Kind: core.QuestionAsk, Run: 2, Bot: "bot:qa", Thread: 2,
		Text: "which env?", Choices: []string{"staging", "prod"}, Status: core.QuestionPending, Choice: -1, Created: at(2)}
	update(t, s, func(tx core.Tx) error {
		var err error
		if q1, err = tx.PutQuestion(q1); err != nil {
			return err
		}
		q2, err = tx.PutQuestion(q2)
		return err
	})
	if q1.ID != 1 || q2.ID != 2 {
		t.Fatalf("question IDs = %d, %d; want 1, 2", q1.ID, q2.ID)
	}
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.QuestionByToken("tok1")
		if err != nil || !reflect.DeepEqual(got, q1) {
			t.Errorf("QuestionByToken(tok1) = %+v, %v; want %+v", got, err, q1)
		}
		if _, err := tx.QuestionByToken("nope"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("QuestionByToken(nope) error = %v, want ErrNotFound", err)
		}
		if _, err := tx.Question(9); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("Question(9) error = %v, want ErrNotFound", err)
		}
		if p, _ := tx.Questions(true, 0); len(p) != 2 {
			t.Errorf("pending = %d, want 2", len(p))
		}
		return nil
	})
	// Answer q1: it leaves the pending index; all questions still listed.
	q1.Status, q1.Choice, q1.Answer, q1.AnsweredBy, q1.AnsweredAt = core.QuestionAnswered, core.ChoiceApprove, "Approve", "slack:T:U", at(5)
	q1.Posts[0].PlatformID = "1.2"
	update(t, s, func(tx core.Tx) error { _, err := tx.PutQuestion(q1); return err })
	view(t, s, func(tx core.ReadTx) error {
		p, _ := tx.Questions(true, 0)
		if len(p) != 1 || p[0].ID != q2.ID {
			t.Errorf("pending after answer = %+v, want only question 2", p)
		}
		all, _ := tx.Questions(false, 0)
		if len(all) != 2 || !reflect.DeepEqual(all[0], q1) {
			t.Errorf("all questions = %+v", all)
		}
		if one, _ := tx.Questions(false, 1); len(one) != 1 {
			t.Errorf("limit 1 gave %d", len(one))
		}
		return nil
	})
	// A new question may not reuse a token, and a stored one may not change it.
	err := s.Update(context.Background(), func(tx core.Tx) error {
		_, err := tx.PutQuestion(core.Question{Token: "tok1", Kind: core.QuestionAsk, Run: 3, Bot: "bot:qa", Thread: 3, Status: core.QuestionPending})
		return err
	})
	if err == nil {
		t.Error("a second question with token tok1 was stored")
	}
	q2.Token = "changed"
	if err := s.Update(context.Background(), func(tx core.Tx) error { _, err := tx.PutQuestion(q2); return err }); err == nil {
		t.Error("a stored question's token changed")
	}
}
