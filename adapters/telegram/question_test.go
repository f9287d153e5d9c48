package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

const qToken = "abcdefghij23"

func approval() core.Question {
	return core.Question{
		ID: 7, Token: qToken, Kind: core.QuestionApproval, Bot: "bot:engineer", Thread: 1,
		Text: "I want to run a shell command.", Tool: "shell",
		Args: json.RawMessage(`{"command":"echo x >> ran.txt"}`), Status: core.QuestionPending,
	}
}

func qDelivery(conv core.ConversationRef, q core.Question) core.QuestionDelivery {
	return core.QuestionDelivery{
		Outbox: 3, Conversation: conv, ReplyTo: "43", Question: q,
		Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer", Name: "Engineer"},
	}
}

type kbMarkup struct {
	InlineKeyboard [][]struct {
		Text         string `json:"text"`
		CallbackData string `json:"callback_data"`
	} `json:"inline_keyboard"`
}

// sentKeyboard decodes the reply_markup of a recorded call.
func sentKeyboard(t *testing.T, c telegramtest.Call) kbMarkup {
	t.Helper()
	var kb kbMarkup
	if err := json.Unmarshal([]byte(c.Params["reply_markup"]), &kb); err != nil {
		t.Fatalf("reply_markup %q: %v", c.Params["reply_markup"], err)
	}
	return kb
}

func TestPostApprovalQuestion(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	id, err := a.PostQuestion(context.Background(), qDelivery("-1001000000002:topic:42", approval()))
	if err != nil {
		t.Fatal(err)
	}
	if id != "1000" {
		t.Errorf("platform id %q, want the sent message_id 1000", id)
	}
	p := e.topicReply(t)
	want := "I want to run a shell command.\n\n<b>shell</b> command:\n<pre>echo x &gt;&gt; ran.txt</pre>"
	if p["text"] != want {
		t.Errorf("text\n got %q\nwant %q", p["text"], want)
	}
	kb := sentKeyboard(t, e.srv.Calls("sendMessage")[0])
	if len(kb.InlineKeyboard) != 1 || len(kb.InlineKeyboard[0]) != 2 {
		t.Fatalf("keyboard %+v, want one row of two", kb)
	}
	for i, want := range []struct{ text, data string }{{"Approve", "q:" + qToken + ":0"}, {"Reject", "q:" + qToken + ":1"}} {
		b := kb.InlineKeyboard[0][i]
		if b.Text != want.text || b.CallbackData != want.data {
			t.Errorf("button %d = %+v, want %+v", i, b, want)
		}
	}
}

func TestPostQuestionStarAccountShowsBotName(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	o.Bot = "*"
	a := e.adapter(t, o)
	if _, err := a.PostQuestion(context.Background(), qDelivery("100000001", approval())); err != nil {
		t.Fatal(err)
	}
	p := e.srv.Calls("sendMessage")[0].Params
	if !strings.HasPrefix(p["text"], "<b>Engineer</b>\nI want to run") {
		t.Errorf("text %q, want the bold bot name on top", p["text"])
	}
	if _, ok := p["message_thread_id"]; ok {
		t.Errorf("message_thread_id in a private chat: %v", p)
	}
}

func TestPostFreeTextAskHasNoKeyboard(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	q := core.Question{ID: 8, Token: qToken, Kind: core.QuestionAsk, Bot: "bot:engineer", Text: "Which **branch**?"}
	if _, err := a.PostQuestion(context.Background(), qDelivery("-1001000000001", q)); err != nil {
		t.Fatal(err)
	}
	p := e.srv.Calls("sendMessage")[0].Params
	if _, ok := p["reply_markup"]; ok {
		t.Errorf("a free-text ask got a keyboard: %v", p["reply_markup"])
	}
	if want := "Which <b>branch</b>?\n\n<i>Reply to this message to answer.</i>"; p["text"] != want {
		t.Errorf("text %q, want %q", p["text"], want)
	}
}

// TestQuestionLimits: whatever the ids, the language and the size of the question
// and its arguments, callback_data stays within 64 bytes and every message (also
// once resolved) within 4,096 UTF-16 code units as Telegram counts them.
func TestQuestionLimits(t *testing.T) {
	cjk := strings.Repeat("请批准这个非常长的部署命令吗？🚀", 600)
	longTok := strings.Repeat("z", 32) // longest token CallbackData accepts
	q := approval()
	q.Token = longTok
	q.Text = cjk
	q.Args, _ = json.Marshal(map[string]string{"command": strings.Repeat("echo 你好 && ", 3000)})
	ask := core.Question{ID: 9999999999, Token: longTok, Kind: core.QuestionAsk, Bot: "bot:engineer", Text: cjk,
		Choices: []string{strings.Repeat("是", 300), "否", "也许吧 🤔", strings.Repeat("y", 9)}}
	for _, q := range []core.Question{q, ask} {
		e := newEnv(t)
		a := e.adapter(t, e.options())
		d := qDelivery("-1001000000002:topic:42", q)
		if _, err := a.PostQuestion(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		sends := e.srv.Calls("sendMessage")
		for i, c := range sends {
			if n := telegramtest.VisibleLen(c.Params["text"], "HTML"); n > MaxMessageLen {
				t.Errorf("%s question part %d is %d UTF-16 units, limit %d", q.Kind, i+1, n, MaxMessageLen)
			}
		}
		kb := sentKeyboard(t, sends[len(sends)-1])
		var n int
		for _, row := range kb.InlineKeyboard {
			for _, b := range row {
				if len(b.CallbackData) > MaxCallbackData {
					t.Errorf("callback_data %q is %d bytes", b.CallbackData, len(b.CallbackData))
				}
				if tok, i, ok := ParseCallbackData(b.CallbackData); !ok || tok != longTok || i != n {
					t.Errorf("button %d data %q parses to %q %d %v", n, b.CallbackData, tok, i, ok)
				}
				n++
			}
		}
		if n != len(q.Options()) {
			t.Errorf("%d buttons, want %d", n, len(q.Options()))
		}
		q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, 0, strings.Repeat("名", 200)
		q.Answer = cjk
		d.Question, d.PlatformID = q, "1000"
		if err := a.ResolveQuestion(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		edit := e.srv.Calls("editMessageText")[0]
		if n := telegramtest.VisibleLen(edit.Params["text"], "HTML"); n > MaxMessageLen {
			t.Errorf("resolved %s question is %d UTF-16 units, limit %d", q.Kind, n, MaxMessageLen)
		}
	}
}

func TestKeyboardLayout(t *testing.T) {
	rowsOf := func(q core.Question) []int {
		kb, err := Keyboard(q)
		if err != nil {
			t.Fatal(err)
		}
		if kb == nil {
			return nil
		}
		var n []int
		for _, r := range kb.InlineKeyboard {
			n = append(n, len(r))
		}
		return n
	}
	tests := []struct {
		name    string
		choices []string
		want    []int
	}{
		{"free text", nil, nil},
		{"short choices share rows of three", []string{"a", "b", "c", "d"}, []int{3, 1}},
		{"long choices get a row each", []string{"a", "a choice that is long", "b", "c"}, []int{1, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rowsOf(core.Question{Token: qToken, Kind: core.QuestionAsk, Choices: tt.choices})
			if len(got) != len(tt.want) {
				t.Fatalf("rows %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("rows %v, want %v", got, tt.want)
				}
			}
		})
	}
	for _, bad := range []string{"", strings.Repeat("z", 33), "tok:1", "ключ"} {
		if _, err := Keyboard(core.Question{Token: bad, Kind: core.QuestionApproval}); !errors.Is(err, ErrBadCallback) {
			t.Errorf("token %q: err %v, want ErrBadCallback", bad, err)
		}
	}
}

func TestPostQuestionBadToken(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	q := approval()
	q.Token = "not a token"
	_, err := a.PostQuestion(context.Background(), qDelivery("100000001", q))
	var de core.DeliveryError
	if !errors.As(err, &de) || !de.Permanent() {
		t.Fatalf("err %v, want a permanent DeliveryError", err)
	}
	if n := len(e.srv.Calls("sendMessage")); n != 0 {
		t.Errorf("%d messages sent for a question without valid buttons", n)
	}
}

func TestResolveQuestionEditsMessage(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	q := approval()
	q.Status, q.Choice, q.AnsweredBy, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "telegram:42", "Alice"
	d := qDelivery("-1001000000002:topic:42", q)
	d.PlatformID = "1005"
	if err := a.ResolveQuestion(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	calls := e.srv.Calls("editMessageText")
	if len(calls) != 1 {
		t.Fatalf("%d editMessageText calls, want 1", len(calls))
	}
	p := calls[0].Params
	if p["chat_id"] != "-1001000000002" || p["message_id"] != "1005" || p["parse_mode"] != "HTML" {
		t.Errorf("params %v", p)
	}
	if !strings.HasPrefix(p["text"], "I want to run a shell command.\n\n<b>shell</b> command:\n<pre>") ||
		!strings.HasSuffix(p["text"], "</pre>\n\n<b>✅ Approved by Alice</b>") {
		t.Errorf("text %q, want the question then the decision", p["text"])
	}
	if rm, ok := p["reply_markup"]; ok {
		t.Errorf("reply_markup %q sent; editMessageText without it removes the buttons", rm)
	}

	// Idempotent: Telegram's "message is not modified" is success.
	e.srv.Fail("editMessageText", telegramtest.Error{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
	if err := a.ResolveQuestion(context.Background(), d); err != nil {
		t.Errorf("not modified: %v, want nil", err)
	}
	// Other refusals are permanent; a retry-after is not.
	e.srv.Fail("editMessageText", telegramtest.Error{Code: 400, Description: "Bad Request: message to edit not found"}, telegramtest.RateLimited(2))
	var de core.DeliveryError
	if err := a.ResolveQuestion(context.Background(), d); !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("message not found: %v, want permanent", err)
	}
	if err := a.ResolveQuestion(context.Background(), d); !errors.As(err, &de) || de.Permanent() || de.RetryAfter() == 0 {
		t.Errorf("429: %v, want retry after", err)
	}
	d.PlatformID = ""
	if err := a.ResolveQuestion(context.Background(), d); !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("no platform id: %v, want permanent", err)
	}
}

func TestResolveDecisionLines(t *testing.T) {
	a, err := New(Options{Name: "m", Bot: "engineer", Token: "t", Engine: newFakeEngine(), Cursors: newFakeCursors()})
	if err != nil {
		t.Fatal(err)
	}
	rejected := approval()
	rejected.Status, rejected.Choice, rejected.AnsweredByName = core.QuestionAnswered, core.ChoiceReject, "Bob <b>"
	expired := approval()
	expired.Status = core.QuestionExpired
	answered := core.Question{Token: qToken, Kind: core.QuestionAsk, Text: "Which?", Choices: []string{"main", "dev"},
		Status: core.QuestionAnswered, Choice: 1, Answer: "dev", AnsweredByName: "Alice"}
	tests := []struct {
		q    core.Question
		want string
	}{
		{rejected, "\n\n<b>❌ Rejected by Bob &lt;b&gt;</b>"},
		{expired, "\n\n<b>❌ Expired without an answer: rejected</b>"},
		{answered, "Which?\n\n<b>💬 Answered by Alice: dev</b>"},
	}
	for _, tt := range tests {
		if got := a.QuestionHTML(qDelivery("1", tt.q), true); !strings.HasSuffix(got, tt.want) {
			t.Errorf("%s %s: %q, want suffix %q", tt.q.Kind, tt.q.Status, got, tt.want)
		}
	}
}
