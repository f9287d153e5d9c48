package feishu_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

const (
	topicConv = core.ConversationRef(feishutest.GroupChat + ":" + atBotMessage)
	aliceID   = core.ActorID("feishu:" + feishutest.AliceOpenID)
	bobID     = core.ActorID("feishu:" + feishutest.BobOpenID)
)

func approvalQ() core.Question {
	return core.Question{ID: 7, Token: "abcdefghijkl", Kind: core.QuestionApproval, Bot: core.BotActorID("engineer"),
		Text: "May I run this?", Tool: "shell", Args: json.RawMessage(`{"command":"echo x >> ran.txt"}`),
		Status: core.QuestionPending, Choice: -1}
}

func buttonValue(t *testing.T, b feishutest.Button) feishu.ButtonValue {
	t.Helper()
	v, ok := feishu.ParseButtonValue(b.Value)
	if !ok {
		t.Fatalf("button %q value %s is not a question payload", b.Text, b.Value)
	}
	return v
}

func TestQuestionCard(t *testing.T) {
	q := approvalQ()
	card := feishu.QuestionCard(q, "Engineer", false)
	if !json.Valid([]byte(card)) {
		t.Fatalf("card is not JSON: %s", card)
	}
	btns := feishutest.CardButtons(card)
	if len(btns) != 2 || btns[0].Text != "Approve" || btns[0].Type != "primary_filled" || btns[1].Text != "Reject" || btns[1].Type != "danger" {
		t.Fatalf("buttons %+v", btns)
	}
	for i, b := range btns {
		if v := buttonValue(t, b); v != (feishu.ButtonValue{Q: q.Token, I: i}) {
			t.Errorf("button %d value %+v", i, v)
		}
		if string(b.Value) != `{"q":"abcdefghijkl","i":`+string(rune('0'+i))+`}` {
			t.Errorf("button %d raw value %s", i, b.Value)
		}
	}
	text := feishutest.CardText(card)
	for _, want := range []string{"**Engineer**\nMay I run this?", "Tool `shell` command:\n```sh\necho x >> ran.txt\n```"} {
		if !strings.Contains(text, want) {
			t.Errorf("card text %q lacks %q", text, want)
		}
	}
	var c struct {
		Config struct {
			UpdateMulti bool `json:"update_multi"`
		} `json:"config"`
		Header struct {
			Title struct{ Content string } `json:"title"`
		} `json:"header"`
	}
	_ = json.Unmarshal([]byte(card), &c)
	if !c.Config.UpdateMulti || c.Header.Title.Content != "Approval needed" {
		t.Errorf("config/header %+v", c)
	}

	// Decided: the decision replaces the buttons, the rest stays.
	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "Alice"
	card = feishu.QuestionCard(q, "", false)
	if b := feishutest.CardButtons(card); len(b) != 0 {
		t.Errorf("decided card still has buttons %+v", b)
	}
	if text := feishutest.CardText(card); !strings.Contains(text, "✅ Approved by Alice") || !strings.Contains(text, "Tool `shell`") || strings.Contains(text, "Engineer") {
		t.Errorf("decided card text %q", text)
	}
	q.Choice, q.AnsweredByName = core.ChoiceReject, "Bob"
	if text := feishutest.CardText(feishu.QuestionCard(q, "", false)); !strings.Contains(text, "❌ Rejected by Bob") {
		t.Errorf("rejected card text %q", text)
	}
	q.Status = core.QuestionExpired
	if text := feishutest.CardText(feishu.QuestionCard(q, "", false)); !strings.Contains(text, "Expired") {
		t.Errorf("expired card text %q", text)
	}

	// A command is shown whole; a fence inside it cannot close the block.
	q = approvalQ()
	long, _ := json.Marshal(map[string]string{"command": strings.Repeat("é", 2000) + "```"})
	q.Args = long
	text = feishutest.CardText(feishu.QuestionCard(q, "", false))
	if !strings.Contains(text, strings.Repeat("é", 2000)+"`\u200b``\n```") || strings.Count(text, "```") != 2 {
		t.Errorf("long command shown as %d bytes: %.200q", len(text), text)
	}
	// Other tools show their arguments as JSON.
	q.Tool, q.Args = "http_fetch", json.RawMessage(`{"url":"https://example.com","method":"POST"}`)
	if text := feishutest.CardText(feishu.QuestionCard(q, "", false)); !strings.Contains(text, "Tool `http_fetch` arguments:\n```json\n{\n  \"url\": \"https://example.com\",") {
		t.Errorf("arguments shown as %q", text)
	}

	// ask_human with choices: one default button each; free text: no buttons.
	ask := core.Question{Token: "mnopqrstuvwx", Kind: core.QuestionAsk, Text: "Which DB?", Choices: []string{"Postgres", "SQLite", "bbolt"}, Status: core.QuestionPending}
	btns = feishutest.CardButtons(feishu.QuestionCard(ask, "", false))
	if len(btns) != 3 || btns[2].Text != "bbolt" || btns[2].Type != "default" || buttonValue(t, btns[2]) != (feishu.ButtonValue{Q: ask.Token, I: 2}) {
		t.Errorf("choice buttons %+v", btns)
	}
	ask.Choices = nil
	card = feishu.QuestionCard(ask, "", false)
	if b := feishutest.CardButtons(card); len(b) != 0 || !strings.Contains(feishutest.CardText(card), "Reply in this topic") {
		t.Errorf("free-text card %s", card)
	}
	if !strings.Contains(feishutest.CardText(feishu.QuestionCard(ask, "", true)), "Reply in this chat") {
		t.Error("free-text card in a p2p chat should say to reply in the chat")
	}
}

func TestParseButtonValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want feishu.ButtonValue
		ok   bool
	}{
		{`{"q":"abcdefghijkl","i":1}`, feishu.ButtonValue{Q: "abcdefghijkl", I: 1}, true},
		{`{"q":"abcdefghijkl","i":"0"}`, feishu.ButtonValue{Q: "abcdefghijkl"}, true},
		{`{"q":"abcdefghijkl"}`, feishu.ButtonValue{}, false},
		{`{"q":"abcdefghijkl","i":-1}`, feishu.ButtonValue{}, false},
		{`{"q":"abcdefghijkl","i":1.5}`, feishu.ButtonValue{}, false},
		{`{"q":"` + strings.Repeat("a", 17) + `","i":0}`, feishu.ButtonValue{}, false},
		{`{"action":"approve","run_id":"run-17"}`, feishu.ButtonValue{}, false},
		{`"q"`, feishu.ButtonValue{}, false},
		{``, feishu.ButtonValue{}, false},
	} {
		got, ok := feishu.ParseButtonValue(json.RawMessage(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseButtonValue(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPostQuestionAndResolve(t *testing.T) {
	h := newHarness(t, nil)
	ctx := ctxT(t)
	q := approvalQ()
	d := core.QuestionDelivery{Outbox: 41, Conversation: topicConv, ReplyTo: "om_trigger", Question: q,
		Sender: core.Sender{Actor: core.BotActorID("engineer"), Handle: "engineer", Name: "Engineer"}}
	id, err := h.a.PostQuestion(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	ms := h.srv.Messages()
	if len(ms) != 1 || ms[0].ID != id || ms[0].Kind != "reply" || ms[0].ReplyTo != "om_trigger" || !ms[0].InThread || ms[0].MsgType != "interactive" || ms[0].UUID == "" {
		t.Fatalf("posted %+v (id %q)", ms, id)
	}
	if len(ms[0].Buttons()) != 2 || strings.Contains(feishutest.CardText(ms[0].Content), "**Engineer**") {
		t.Errorf("own bot's card: %s", ms[0].Content)
	}
	// A retried post (same outbox) is not shown twice.
	if id2, err := h.a.PostQuestion(ctx, d); err != nil || id2 != id || len(h.srv.Messages()) != 1 {
		t.Errorf("retry: %q %v, %d messages", id2, err, len(h.srv.Messages()))
	}

	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "Alice"
	d.Question, d.PlatformID = q, id
	if err := h.a.ResolveQuestion(ctx, d); err != nil {
		t.Fatal(err)
	}
	ps := h.srv.Patches()
	if len(ps) != 1 || ps[0].MessageID != id {
		t.Fatalf("patches %+v", ps)
	}
	if b := feishutest.CardButtons(ps[0].Content); len(b) != 0 {
		t.Errorf("resolved card has buttons %+v", b)
	}
	if text := feishutest.CardText(ps[0].Content); !strings.Contains(text, "Approved by Alice") || !strings.Contains(text, "May I run this?") {
		t.Errorf("resolved card text %q", text)
	}
	if err := h.a.ResolveQuestion(ctx, core.QuestionDelivery{Conversation: topicConv, Question: q}); err == nil {
		t.Error("resolve without a platform id should fail")
	} else if de, ok := err.(core.DeliveryError); !ok || !de.Permanent() {
		t.Errorf("resolve without a platform id: %v is not a permanent DeliveryError", err)
	}
}

func TestPostQuestionStarAccountP2P(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Bot = "*" })
	ask := core.Question{Token: "mnopqrstuvwx", Kind: core.QuestionAsk, Text: "Which branch?", Status: core.QuestionPending}
	_, err := h.a.PostQuestion(ctxT(t), core.QuestionDelivery{Conversation: core.ConversationRef(feishutest.P2PChat), Question: ask,
		Sender: core.Sender{Actor: core.BotActorID("reviewer"), Handle: "reviewer", Name: "Reviewer"}})
	if err != nil {
		t.Fatal(err)
	}
	ms := h.srv.Messages()
	if len(ms) != 1 || ms[0].Kind != "create" || ms[0].ReceiveID != feishutest.P2PChat || ms[0].IDType != "chat_id" {
		t.Fatalf("posted %+v", ms)
	}
	if text := feishutest.CardText(ms[0].Content); !strings.HasPrefix(text, "**Reviewer**\nWhich branch?") || !strings.Contains(text, "Reply in this chat") || len(ms[0].Buttons()) != 0 {
		t.Errorf("card text %q buttons %+v", text, ms[0].Buttons())
	}
}

// toast decodes a card callback response body.
func toast(t *testing.T, body string) *feishu.Toast {
	t.Helper()
	var r feishu.CardResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("card response %q: %v", body, err)
	}
	return r.Toast
}

func TestCardActionWebhookOutcomes(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	q := approvalQ()
	h.eng.questions[q.Token] = &q
	h.eng.approvers[aliceID] = true
	h.eng.approvers[bobID] = true
	card := feishu.QuestionCard(q, "", false)
	approve, reject := feishutest.CardButtons(card)[0].Value, feishutest.CardButtons(card)[1].Value
	click := func(who string, v json.RawMessage) (int, string) {
		return h.post("card", feishutest.CardAction{OpenID: who, MessageID: "om_card", Value: v}.JSON(), feishutest.EncryptKey)
	}

	// A stranger is refused privately and nothing is answered.
	s, b := click("ou_stranger0000000000000000000000", approve)
	if tt := toast(t, b); s != 200 || tt == nil || tt.Type != "error" || tt.Content != "Only approvers of @engineer can answer this." {
		t.Errorf("stranger: %d %s", s, b)
	}
	// Alice approves.
	s, b = click(feishutest.AliceOpenID, approve)
	if tt := toast(t, b); s != 200 || tt == nil || tt.Type != "success" || tt.Content != "Recorded" {
		t.Errorf("alice: %d %s", s, b)
	}
	// Bob is told it was decided.
	s, b = click(feishutest.BobOpenID, reject)
	if tt := toast(t, b); s != 200 || tt == nil || tt.Type != "info" || tt.Content != "Already decided: Approved by Alice" {
		t.Errorf("bob: %d %s", s, b)
	}
	// A token that is not (or no longer) a question.
	s, b = click(feishutest.AliceOpenID, json.RawMessage(`{"q":"zzzzzzzzzzzz","i":0}`))
	if tt := toast(t, b); s != 200 || tt == nil || tt.Type != "warning" || tt.Content != "This question is no longer open." {
		t.Errorf("unknown: %d %s", s, b)
	}

	got := h.eng.answers.All()
	if len(got) != 4 {
		t.Fatalf("answers %+v", got)
	}
	want := core.Answer{Token: q.Token, Choice: 0, Actor: aliceID, Name: "Alice", Account: "feishu/acme"}
	if got[1] != want {
		t.Errorf("alice's answer %+v, want %+v", got[1], want)
	}
	if got[2].Choice != core.ChoiceReject || got[2].Actor != bobID || got[0].Actor != "feishu:ou_stranger0000000000000000000000" {
		t.Errorf("answers %+v", got)
	}

	// The engine failing: an error toast, 200 so the platform shows it.
	h.eng.mu.Lock()
	h.eng.answerErr = errors.New("disk full")
	h.eng.mu.Unlock()
	s, b = click(feishutest.AliceOpenID, approve)
	if tt := toast(t, b); s != 200 || tt == nil || tt.Type != "error" {
		t.Errorf("engine failure: %d %s", s, b)
	}
	if n := len(h.srv.Patches()); n != 0 {
		t.Errorf("the click handler patched cards itself (%d); the lanes do that", n)
	}
}

func TestCardActionWebhookForgeriesAndLegacy(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	q := approvalQ()
	h.eng.questions[q.Token] = &q
	h.eng.approvers[aliceID] = true
	v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[1].Value
	ev := feishutest.CardAction{OpenID: feishutest.AliceOpenID, MessageID: "om_card", Value: v}
	target := h.web.URL + "/feishu/acme/card"

	// Forged: signed with the wrong key, or not signed, or signed with a wrong
	// verification token in the legacy scheme.
	forged := []*http.Request{}
	r, _ := feishutest.WebhookRequest(target, ev.JSON(), "TESTwrongKey00000000000000000001")
	forged = append(forged, r)
	r, _ = feishutest.WebhookRequest(target, ev.JSON(), "")
	forged = append(forged, r)
	r, _ = feishutest.LegacyCardRequest(target, ev.LegacyJSON(), "TESTwrongToken")
	forged = append(forged, r)
	r, _ = feishutest.LegacyCardRequest(target, ev.LegacyJSON(), feishutest.VerificationToken)
	r.Header.Set("X-Lark-Request-Nonce", "tampered")
	forged = append(forged, r)
	for i, req := range forged {
		if s, b := h.do(req); s/100 != 4 {
			t.Errorf("forged request %d: %d %s", i, s, b)
		}
	}
	if a := h.eng.answers.All(); len(a) != 0 {
		t.Fatalf("forged clicks answered: %+v", a)
	}

	// The legacy format, signed with the verification token, answers.
	r, _ = feishutest.LegacyCardRequest(target, ev.LegacyJSON(), feishutest.VerificationToken)
	s, b := h.do(r)
	if tt := toast(t, b); s != 200 || tt == nil || tt.Content != "Recorded" {
		t.Errorf("legacy click: %d %s", s, b)
	}
	if a := h.eng.answers.All(); len(a) != 1 || a[0].Choice != core.ChoiceReject || a[0].Actor != aliceID || a[0].Token != q.Token {
		t.Errorf("legacy answer %+v", a)
	}
	if q.Status != core.QuestionAnswered || q.Decision() != "Rejected by Alice" {
		t.Errorf("question after legacy click %+v", q)
	}
}

func TestCardActionLongConnection(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	q := approvalQ()
	h.eng.questions[q.Token] = &q
	h.eng.approvers[bobID] = true
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[0].Value

	// type=event frame: the toast goes into the ack.
	id, err := h.srv.PushCard(ctx, feishutest.CardAction{OpenID: feishutest.AliceOpenID, MessageID: "om_card", Value: v}.JSON(), "event")
	if err != nil {
		t.Fatal(err)
	}
	ack, err := h.srv.WaitAck(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Code != 200 || ack.Frame.Header("type") != "event" {
		t.Errorf("ack %+v", ack)
	}
	if tt := toast(t, string(ack.Data)); tt == nil || tt.Type != "error" || !strings.Contains(tt.Content, "@engineer") {
		t.Errorf("forbidden toast in ack: %s", ack.Data)
	}

	// type=card frame: acked without data, the answer is recorded.
	id, err = h.srv.PushCard(ctx, feishutest.CardAction{OpenID: feishutest.BobOpenID, MessageID: "om_card", Value: v}.JSON(), "card")
	if err != nil {
		t.Fatal(err)
	}
	ack, err = h.srv.WaitAck(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Code != 200 || ack.Data != nil || ack.Payload != `{"code":200,"headers":null,"data":null}` {
		t.Errorf("type=card ack %+v", ack)
	}
	a := h.eng.answers.All()
	if len(a) != 2 || a[1] != (core.Answer{Token: q.Token, Choice: 0, Actor: bobID, Name: "Bob", Account: "feishu/acme"}) {
		t.Errorf("answers %+v", a)
	}
	if len(h.eng.ins.All()) != 0 {
		t.Error("card clicks were ingested as messages")
	}
}

// buttonKeys returns the sorted keys of every JSON object on the path to the first
// button of a card, so our card can be compared with the fixture's shape.
func buttonKeys(t *testing.T, card []byte) [][]string {
	t.Helper()
	var v struct {
		Body struct {
			Elements []json.RawMessage `json:"elements"`
		} `json:"body"`
	}
	if err := json.Unmarshal(card, &v); err != nil {
		t.Fatal(err)
	}
	keys := func(raw json.RawMessage) []string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for _, e := range v.Body.Elements {
		var set struct {
			Tag     string `json:"tag"`
			Columns []struct {
				Elements []json.RawMessage `json:"elements"`
			} `json:"columns"`
		}
		_ = json.Unmarshal(e, &set)
		if set.Tag != "column_set" {
			continue
		}
		btn := set.Columns[0].Elements[0]
		var b struct {
			Behaviors []json.RawMessage `json:"behaviors"`
		}
		_ = json.Unmarshal(btn, &b)
		return [][]string{keys(e), keys(btn), keys(b.Behaviors[0])}
	}
	t.Fatalf("no column_set in %s", card)
	return nil
}

func TestQuestionCardMatchesFixtureShape(t *testing.T) {
	fix := fixture(t, "card_v2_with_buttons.json")
	ours := []byte(feishu.QuestionCard(approvalQ(), "", false))
	if got, want := buttonKeys(t, ours), buttonKeys(t, fix); !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("button shape %v, fixture %v", got, want)
	}
	// The test helper reads the fixture's buttons as a person sees them.
	btns := feishutest.CardButtons(string(fix))
	if len(btns) != 2 || btns[0].Text != "Approve" || btns[0].Type != "primary_filled" || btns[1].Type != "danger" || !strings.Contains(string(btns[1].Value), `"reject"`) {
		t.Errorf("fixture buttons %+v", btns)
	}
	// An approved card, like the fixture's, has no buttons and says who approved.
	approved := fixture(t, "card_v2_approved.json")
	if b := feishutest.CardButtons(string(approved)); len(b) != 0 || !strings.Contains(feishutest.CardText(string(approved)), "Approved by Alice") {
		t.Errorf("approved fixture: %+v", b)
	}
}

func TestCardResponseMatchesFixture(t *testing.T) {
	var fix struct {
		ToastOnly json.RawMessage `json:"toast_only"`
	}
	if err := json.Unmarshal(fixture(t, "card_action_trigger_v2.expected_responses.json"), &fix); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Toast struct {
			Type    string `json:"type"`
			Content string `json:"content"`
		} `json:"toast"`
	}
	_ = json.Unmarshal(fix.ToastOnly, &want)
	b, _ := json.Marshal(feishu.CardResponse{Toast: &feishu.Toast{Type: want.Toast.Type, Content: want.Toast.Content}})
	var got, fixNoI18n map[string]map[string]any
	_ = json.Unmarshal(b, &got)
	_ = json.Unmarshal(fix.ToastOnly, &fixNoI18n)
	delete(fixNoI18n["toast"], "i18n")
	if !reflect.DeepEqual(got, fixNoI18n) {
		t.Errorf("response %s, fixture %s", b, fix.ToastOnly)
	}
	if b, _ := json.Marshal(feishu.CardResponse{}); string(b) != "{}" {
		t.Errorf("no-change response %s", b)
	}
}

func TestLegacyCardFixtureParsed(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	// The fixture's button is another card's (no question payload): no change, no answer.
	raw := compact(t, fixture(t, "card_action_legacy.json"))
	req, _ := feishutest.LegacyCardRequest(h.web.URL+"/feishu/acme/card", raw, feishutest.VerificationToken)
	if s, b := h.do(req); s != 200 || strings.TrimSpace(b) != "{}" {
		t.Errorf("legacy fixture: %d %s", s, b)
	}
	if a := h.eng.answers.All(); len(a) != 0 {
		t.Errorf("answered %+v", a)
	}
}
