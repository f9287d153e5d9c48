package e2e

import (
	"fmt"
	"strings"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
)

// TestTelegramMentionOfAPersonIsNotAnAnswer: while the engineer waits for a
// free-text answer, "@engineer_bot @alice what do you think?" (a mention of
// another person) and a text_mention of a user without a username are not the
// answer (DESIGN.md §5: a message meant for the question addresses no other bot
// or person); a reply to the question message is.
func TestTelegramMentionOfAPersonIsNotAnAnswer(t *testing.T) {
	r := startTelegramApproval(t, false, func(r *tgApprovalRig) {
		r.llm.Handle(func(req openaitest.Request) openaitest.Reply {
			ms := req.Body.Messages
			if last := ms[len(ms)-1]; last.Role == "tool" {
				return openaitest.Text("deploying " + strings.TrimSpace(last.Content))
			}
			return openaitest.Calls(openaitest.Call("ask_human", `{"question":"Which branch should I deploy?"}`))
		})
	})
	r.push(tgMention(201, tgApprovalGroup, "deploy please"))
	r.idle()
	q := r.question()
	if q.Kind != core.QuestionAsk || q.Status != core.QuestionPending {
		t.Fatalf("question %+v, want a pending free-text ask", q)
	}
	// "@engineer_bot @alice what do you think?": offsets in UTF-16 units.
	r.push([]byte(fmt.Sprintf(`{"message":{"message_id":202,"from":{"id":%d,"is_bot":false,"first_name":"Bob"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225680,"text":"@engineer_bot @alice what do you think?",
"entities":[{"offset":0,"length":13,"type":"mention"},{"offset":14,"length":6,"type":"mention"}]}}`, tgBob.ID, tgApprovalGroup)))
	// "@engineer_bot Dana, your call": Dana has no username (text_mention).
	r.push([]byte(fmt.Sprintf(`{"message":{"message_id":203,"from":{"id":%d,"is_bot":false,"first_name":"Bob"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225685,"text":"@engineer_bot Dana, your call",
"entities":[{"offset":0,"length":13,"type":"mention"},{"offset":14,"length":4,"type":"text_mention","user":{"id":1009,"is_bot":false,"first_name":"Dana"}}]}}`,
		tgBob.ID, tgApprovalGroup)))
	r.idle()
	if cur := r.questionByID(q.ID); cur.Status != core.QuestionPending {
		t.Fatalf("a message mentioning another person answered the question: %+v", cur)
	}
	r.push([]byte(fmt.Sprintf(`{"message":{"message_id":204,"from":{"id":%d,"is_bot":false,"first_name":"Alice"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225700,"text":"@bob release-2.4",
"entities":[{"offset":0,"length":4,"type":"mention"}],
"reply_to_message":{"message_id":%s,"from":{"id":900,"is_bot":true,"first_name":"engineer_bot","username":"engineer_bot"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225690,"text":"Which branch should I deploy?"}}}`,
		tgAlice.ID, tgApprovalGroup, q.Posts[0].PlatformID, tgApprovalGroup)))
	r.idle()
	if cur := r.questionByID(q.ID); cur.Status != core.QuestionAnswered || !strings.Contains(cur.Decision(), "release-2.4") {
		t.Fatalf("the reply to the question did not answer it: %+v", cur)
	}
}

// questionByID reads question id from the store.
func (r *tgApprovalRig) questionByID(id core.QuestionID) core.Question {
	r.t.Helper()
	qs := storetest.Read(r.t, r.eng.Store(), func(tx core.ReadTx) ([]core.Question, error) { return tx.Questions(false, 0) })
	for _, q := range qs {
		if q.ID == id {
			return q
		}
	}
	r.t.Fatalf("no question %d", id)
	return core.Question{}
}
