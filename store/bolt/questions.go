package bolt

import (
	"fmt"

	"openbot/core"
	"openbot/store/check"
)

// Questions (schema version 2): bucket questions holds QuestionID BE ->
// core.Question (NextSequence: question IDs), question_tokens Token -> QuestionID
// BE, question_pending QuestionID BE for pending ones.

func (r *readTx) Question(id core.QuestionID) (core.Question, error) {
	var q core.Question
	err := r.get(bktQuestions, u64(uint64(id)), &q, fmt.Sprintf("question %d", id))
	return q, err
}

func (r *readTx) QuestionByToken(token string) (core.Question, error) {
	var v []byte
	if token != "" {
		v = r.bucket(bktQuestionTokens).Get([]byte(token))
	}
	if v == nil {
		return core.Question{}, fmt.Errorf("question token %q: %w", token, core.ErrNotFound)
	}
	return r.Question(core.QuestionID(decodeU64(v)))
}

func (r *readTx) Questions(pendingOnly bool, limit int) ([]core.Question, error) {
	var out []core.Question
	if pendingOnly {
		c := r.bucket(bktQuestionPending).Cursor()
		for k, _ := c.First(); k != nil && !full(len(out), limit); k, _ = c.Next() {
			q, err := r.Question(core.QuestionID(decodeU64(k)))
			if err != nil {
				return nil, fmt.Errorf("pending question index: %w", err)
			}
			out = append(out, q)
		}
		return out, nil
	}
	c := r.bucket(bktQuestions).Cursor()
	for k, _ := c.First(); k != nil && !full(len(out), limit); k, _ = c.Next() {
		q, err := r.Question(core.QuestionID(decodeU64(k)))
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// PutQuestion stores q. A new question needs a Token no other question has; a
// stored question's Token cannot change.
func (w *writeTx) PutQuestion(q core.Question) (core.Question, error) {
	if err := check.Question(q); err != nil {
		return q, err
	}
	tokens := w.bucket(bktQuestionTokens)
	if q.ID == 0 {
		if tokens.Get([]byte(q.Token)) != nil {
			return q, check.Invalid("question token %q is taken", q.Token)
		}
		id, err := w.nextID(bktQuestions)
		if err != nil {
			return q, err
		}
		q.ID = core.QuestionID(id)
		if err := tokens.Put([]byte(q.Token), u64(id)); err != nil {
			return q, err
		}
	} else if err := check.QuestionUpdate(q, w.Question); err != nil {
		return q, err
	}
	if err := setIndex(w.bucket(bktQuestionPending), u64(uint64(q.ID)), q.Status == core.QuestionPending); err != nil {
		return q, err
	}
	return q, w.put(bktQuestions, u64(uint64(q.ID)), q)
}
