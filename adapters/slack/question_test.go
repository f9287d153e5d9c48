package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// block is the wire shape of the Block Kit blocks the adapter sends, as far as the
// tests look at it.
type block struct {
	Type    string `json:"type"`
	BlockID string `json:"block_id"`
	Text    *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"text"`
	Elements []struct {
		Type     string          `json:"type"`
		ActionID string          `json:"action_id"`
		Value    string          `json:"value"`
		Style    string          `json:"style"`
		Text     json.RawMessage `json:"text"` // an object for buttons, a string in context blocks
	} `json:"elements"`
}

// label is a button's text.
func label(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var o struct{ Text string }
	unmarshal(t, raw, &o)
	return o.Text
}

func blocksOf(t *testing.T, c slacktest.Call) []block {
	t.Helper()
	var bs []block
	unmarshal(t, []byte(c.Form.Get("blocks")), &bs)
	return bs
}

func findBlock(bs []block, typ string) *block {
	for i := range bs {
		if bs[i].Type == typ {
			return &bs[i]
		}
	}
	return nil
}

// contextText is the text of a context block's first element; the element decodes
// into Elements with its text under Text.Text only for buttons, so read it raw.
func contextText(t *testing.T, c slacktest.Call) string {
	t.Helper()
	var raw []struct {
		Type     string `json:"type"`
		Elements []struct {
			Text string `json:"text"`
		} `json:"elements"`
	}
	unmarshal(t, []byte(c.Form.Get("blocks")), &raw)
	for _, b := range raw {
		if b.Type == "context" && len(b.Elements) > 0 {
			return b.Elements[0].Text
		}
	}
	return ""
}

var conv = Conversation{Team: "T0TEST", Channel: "C0TEST001", ThreadTS: "1767225600.000100"}.Ref()

func approval(args string) core.Question {
	return core.Question{ID: 7, Token: "abcdefghijkl", Kind: core.QuestionApproval, Bot: "bot:engineer",
		Tool: "shell", Args: json.RawMessage(args), Status: core.QuestionPending, Choice: -1}
}

var engineer = core.Sender{Actor: "bot:engineer", Handle: "engineer", Name: "Engineer"}

func TestPostQuestionApprovalBlocks(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Bot = "*" })
	long := strings.Repeat("x", 4000)
	q := approval(`{"command":"echo <hi> && cat ` + "```" + long + `"}`)
	ts, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Outbox: 1, Conversation: conv, Sender: engineer, Question: q})
	if err != nil {
		t.Fatal(err)
	}
	posts := e.slack.CallsTo("chat.postMessage")
	if len(posts) != 1 || ts == "" {
		t.Fatalf("posts %d, ts %q", len(posts), ts)
	}
	p := posts[0]
	if p.Form.Get("channel") != "C0TEST001" || p.Form.Get("thread_ts") != "1767225600.000100" {
		t.Errorf("posted to %v", p.Form)
	}
	if p.Form.Get("username") != "Engineer" || p.Form.Get("icon_emoji") == "" {
		t.Errorf(`a "*" app must post as the asking bot: username %q icon %q`, p.Form.Get("username"), p.Form.Get("icon_emoji"))
	}
	if fb := p.Form.Get("text"); !strings.Contains(fb, "Engineer asks for approval to run shell") {
		t.Errorf("fallback text %q", fb)
	}
	bs := blocksOf(t, p)
	if len(bs) != 4 || bs[0].Type != "section" || bs[1].BlockID != blockArgs || bs[2].BlockID != blockArgs+"_2" || bs[3].Type != "actions" {
		t.Fatalf("blocks %+v", bs)
	}
	if head := bs[0].Text.Text; !strings.Contains(head, "*Engineer* asks for approval to run `shell`") || bs[0].Text.Type != "mrkdwn" {
		t.Errorf("head %q", head)
	}
	code := bs[1].Text.Text
	if !strings.HasPrefix(code, "`shell` command:\n```\necho &lt;hi&gt; &amp;&amp; cat `\u200b``xxx") || !strings.HasSuffix(code, "\n```") {
		t.Errorf("command code block %q", code[:min(len(code), 80)])
	}
	if got := commandOf(t, bs); got != "echo <hi> && cat ```"+long {
		t.Errorf("the code sections show %d characters, want the whole command of %d", len(got), len(long)+20)
	}
	for _, b := range bs[1:3] {
		inner := strings.TrimSuffix(b.Text.Text[strings.Index(b.Text.Text, "```")+3:], "```")
		if n := len([]rune(b.Text.Text)); n > 3000 || strings.Contains(inner, "```") || strings.Contains(inner, "<hi>") {
			t.Errorf("a code section of %d characters (Slack: 3,000) must not close early and must be escaped: %q", n, inner[:min(len(inner), 120)])
		}
	}
	btn := bs[3].Elements
	if len(btn) != 2 {
		t.Fatalf("buttons %+v", btn)
	}
	want := []struct{ id, value, style, label string }{
		{"openbot_q_0", "abcdefghijkl:0", "primary", "Approve"},
		{"openbot_q_1", "abcdefghijkl:1", "danger", "Reject"},
	}
	for i, w := range want {
		b := btn[i]
		if b.Type != "button" || b.ActionID != w.id || b.Value != w.value || b.Style != w.style || label(t, b.Text) != w.label {
			t.Errorf("button %d = %+v, want %+v", i, b, w)
		}
	}
}

func TestPostQuestionAskShapes(t *testing.T) {
	e := newEnv(t, nil) // the app is the engineer itself: no username override
	free := core.Question{ID: 1, Token: "tok0", Kind: core.QuestionAsk, Text: "Which **branch** should I use?"}
	if _, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Sender: engineer, Question: free}); err != nil {
		t.Fatal(err)
	}
	choice := core.Question{ID: 2, Token: "tok1", Kind: core.QuestionAsk, Text: "Deploy where?", Choices: []string{"staging", "prod", strings.Repeat("long ", 30)}}
	if _, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Sender: engineer, Question: choice}); err != nil {
		t.Fatal(err)
	}
	posts := e.slack.CallsTo("chat.postMessage")
	if posts[0].Form.Get("username") != "" {
		t.Errorf("own bot posted with a username override %q", posts[0].Form.Get("username"))
	}
	bs := blocksOf(t, posts[0])
	if findBlock(bs, "actions") != nil {
		t.Errorf("a free-text question has buttons: %+v", bs)
	}
	if !strings.Contains(bs[0].Text.Text, "Which *branch* should I use?") {
		t.Errorf("question text not formatted to mrkdwn: %q", bs[0].Text.Text)
	}
	if h := contextText(t, posts[0]); !strings.Contains(h, "Reply in this thread") {
		t.Errorf("free-text hint %q", h)
	}
	act := findBlock(blocksOf(t, posts[1]), "actions")
	if act == nil || len(act.Elements) != 3 {
		t.Fatalf("choice buttons %+v", act)
	}
	for i, b := range act.Elements {
		if b.Style != "" || b.Value != ButtonValue("tok1", i) || b.ActionID != ActionPrefix+string(rune('0'+i)) {
			t.Errorf("choice button %d = %+v", i, b)
		}
	}
	if n := len([]rune(label(t, act.Elements[2].Text))); n > maxButtonText {
		t.Errorf("button label of %d characters, Slack allows %d", n, maxButtonText)
	}
}

func TestResolveQuestionReplacesButtons(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Bot = "*" })
	q := approval(`{"command":"ls"}`)
	q.Status, q.Choice, q.AnsweredByName = core.QuestionAnswered, core.ChoiceApprove, "Alice"
	d := core.QuestionDelivery{Conversation: conv, Sender: engineer, Question: q, PlatformID: "1767300000.000009"}
	for range 2 { // idempotent: the same update twice
		if err := e.a.ResolveQuestion(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	ups := e.slack.CallsTo("chat.update")
	if len(ups) != 2 {
		t.Fatalf("updates %d", len(ups))
	}
	u := ups[0]
	if u.Form.Get("channel") != "C0TEST001" || u.Form.Get("ts") != "1767300000.000009" {
		t.Errorf("updated %v", u.Form)
	}
	bs := blocksOf(t, u)
	if findBlock(bs, "actions") != nil {
		t.Errorf("buttons left after the decision: %+v", bs)
	}
	if bs[0].Type != "section" || !strings.Contains(bs[0].Text.Text, "shell") {
		t.Errorf("question text gone: %+v", bs)
	}
	if c := contextText(t, u); !strings.Contains(c, "Approved by Alice") {
		t.Errorf("decision line %q", c)
	}
	if fb := u.Form.Get("text"); !strings.Contains(fb, "Approved by Alice") {
		t.Errorf("fallback %q", fb)
	}

	q.Status = core.QuestionExpired
	if err := e.a.ResolveQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Question: q, PlatformID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	if c := contextText(t, e.slack.CallsTo("chat.update")[2]); !strings.Contains(c, "Expired") {
		t.Errorf("expired decision line %q", c)
	}
}

func TestQuestionErrorsMapped(t *testing.T) {
	e := newEnv(t, nil)
	q := approval(`{}`)
	var de core.DeliveryError

	err := e.a.ResolveQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Question: q})
	if !errors.As(err, &de) || !de.Permanent() || !errors.Is(err, ErrNotPosted) {
		t.Errorf("resolve without a ts = %v, want permanent ErrNotPosted", err)
	}
	e.slack.FailNext("chat.update", http.StatusOK, "message_not_found", 0)
	err = e.a.ResolveQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Question: q, PlatformID: "1.1"})
	if !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("message_not_found = %v, want permanent", err)
	}
	e.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "", 7*time.Second)
	_, err = e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Question: q})
	if !errors.As(err, &de) || de.Permanent() || de.RetryAfter() != 7*time.Second {
		t.Errorf("429 = %v, want retry after 7s", err)
	}
	e.slack.FailNext("chat.postMessage", http.StatusOK, "not_in_channel", 0)
	_, err = e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Question: q})
	if !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("not_in_channel = %v, want permanent", err)
	}
	_, err = e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: "nonsense", Question: q})
	if !errors.As(err, &de) || !de.Permanent() {
		t.Errorf("bad conversation = %v, want permanent", err)
	}
}

func TestPostQuestionApprovalWithText(t *testing.T) {
	e := newEnv(t, nil)
	q := approval(`{"command":"ls"}`)
	q.Text = "@engineer wants to run **shell**"
	if _, err := e.a.PostQuestion(t.Context(), core.QuestionDelivery{Conversation: conv, Sender: engineer, Question: q}); err != nil {
		t.Fatal(err)
	}
	bs := blocksOf(t, e.slack.CallsTo("chat.postMessage")[0])
	if bs[0].Text.Text != "@engineer wants to run *shell*" {
		t.Errorf("question text %q", bs[0].Text.Text)
	}
	if bs[1].Text.Text != "`shell` command:\n```\nls\n```" {
		t.Errorf("args %q", bs[1].Text.Text)
	}
}

func TestParseButton(t *testing.T) {
	cases := []struct {
		action, value string
		token         string
		index         int
		ok            bool
	}{
		{"openbot_q_0", "abcdefghijkl:0", "abcdefghijkl", 0, true},
		{"openbot_q_12", "t:12", "t", 12, true},
		{"openbot_q_1", "abcdefghijkl:0", "", 0, false}, // index disagrees
		{"approve_plan", "run-17:approve", "", 0, false},
		{"openbot_q_x", "t:x", "", 0, false},
		{"openbot_q_-1", "t:-1", "", 0, false},
		{"openbot_q_01", "t:01", "", 0, false},
		{"openbot_q_0", ":0", "", 0, false},
		{"openbot_q_0", "nocolon", "", 0, false},
	}
	for _, c := range cases {
		tok, idx, ok := ParseButton(c.action, c.value)
		if ok != c.ok || tok != c.token || idx != c.index {
			t.Errorf("ParseButton(%q, %q) = %q %d %v", c.action, c.value, tok, idx, ok)
		}
	}
	if tok, idx, ok := ParseButton(ActionPrefix+"1", ButtonValue("zz", 1)); !ok || tok != "zz" || idx != 1 {
		t.Errorf("ButtonValue round trip = %q %d %v", tok, idx, ok)
	}
}

// click is Alice approving question abcdefghijkl in the fixture thread.
var aliceApproves = slacktest.Click{User: "U0TEST001", UserName: "alice", Channel: "C0TEST001",
	MessageTS: "1767300000.000001", ThreadTS: "1767225600.000100", ActionID: "openbot_q_0", Value: "abcdefghijkl:0", Label: "Approve"}

func (e *env) click(t *testing.T, c slacktest.Click, secret string) *httptest.ResponseRecorder {
	t.Helper()
	req, err := slacktest.InteractiveRequest(t.Context(), "/slack/acme/interactive", secret, c.Payload(), e.a.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	e.mux.ServeHTTP(rec, req)
	return rec
}

func TestClickOverHTTPAnswers(t *testing.T) {
	e := newEnv(t, nil)
	e.a.users.Put("U0TEST001", cachedUser{name: "Alice"}, testNow)

	rec := e.click(t, aliceApproves, "wrong-secret")
	if rec.Code != http.StatusUnauthorized || len(e.engine.answers.All()) != 0 {
		t.Fatalf("bad signature: status %d, answers %d; want 401 and none", rec.Code, len(e.engine.answers.All()))
	}

	rec = e.click(t, aliceApproves, testSecret)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	got := e.engine.answers.All()
	want := core.Answer{Token: "abcdefghijkl", Choice: 0, Actor: "slack:T0TEST:U0TEST001", Name: "Alice", Account: "slack/acme"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("answers %+v, want [%+v] before the 200", got, want)
	}
	if n := len(e.slack.CallsTo("users.info")); n != 0 {
		t.Errorf("users.info called %d times before answering Slack", n)
	}

	// A clicker whose name is not cached is named from the payload, still without
	// a Web API call; an accepted answer gets no notice.
	bob := aliceApproves
	bob.User, bob.UserName, bob.ActionID, bob.Value = "U0TEST002", "bob", "openbot_q_1", "abcdefghijkl:1"
	if rec := e.click(t, bob, testSecret); rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if got := e.engine.answers.All(); len(got) != 2 || got[1].Name != "bob" || got[1].Choice != 1 || got[1].Actor != "slack:T0TEST:U0TEST002" {
		t.Errorf("second answer %+v", got[1:])
	}

	// Not a question button (the fixture's own plan buttons): 200, nothing answered.
	body := []byte(strings.TrimSpace(string(fixture(t, "interactive_block_actions.http_body.txt"))))
	e.a.clock = fixedClock{time.Unix(1767225702, 0)}
	if rec := e.post(t, "/slack/acme/interactive", body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); rec.Code != http.StatusOK {
		t.Errorf("foreign action status %d", rec.Code)
	}
	if n := len(e.engine.answers.All()); n != 2 {
		t.Errorf("a foreign action was answered (%d answers)", n)
	}
	e.a.bg.wait(5 * time.Second)
	if n := len(e.slack.CallsTo("chat.postEphemeral")); n != 0 {
		t.Errorf("%d notices for accepted or foreign clicks", n)
	}
}

// TestClickNotices: refused, late, unknown and failed answers each get a private
// notice to the clicker in the question's thread, after Slack got its 200.
func TestClickNotices(t *testing.T) {
	decided := approval(`{}`)
	decided.Status, decided.Choice, decided.AnsweredByName = core.QuestionAnswered, core.ChoiceReject, "Bob"
	cases := []struct {
		name string
		res  core.AnswerResult
		err  error
		want string
	}{
		{"forbidden", core.AnswerResult{Outcome: core.AnswerForbidden, Question: approval(`{}`)}, nil, "Only approvers of @engineer can answer this."},
		{"decided", core.AnswerResult{Outcome: core.AnswerDecided, Question: decided}, nil, "Already decided: Rejected by Bob"},
		{"unknown", core.AnswerResult{Outcome: core.AnswerUnknown}, nil, "no longer known"},
		{"failed", core.AnswerResult{}, errors.New("disk full"), "could not be recorded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.engine.answerFn = func(core.Answer) (core.AnswerResult, error) { return c.res, c.err }
			srv := httptest.NewServer(e.mux)
			defer srv.Close()
			release := e.slack.Hold("chat.postEphemeral")
			defer release()

			e.a.clock = fixedClock{time.Now()}
			req, err := slacktest.InteractiveRequest(t.Context(), srv.URL+"/slack/acme/interactive", testSecret, aliceApproves.Payload(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			// Slack has its answer while the notice is still held in flight.
			calls, err := e.slack.WaitCalls(waitCtx(t), "chat.postEphemeral", 1)
			if err != nil {
				t.Fatal(err)
			}
			release()
			n := calls[0].Form
			if n.Get("channel") != "C0TEST001" || n.Get("user") != "U0TEST001" || n.Get("thread_ts") != "1767225600.000100" {
				t.Errorf("notice sent to %v", n)
			}
			if !strings.Contains(n.Get("text"), c.want) {
				t.Errorf("notice %q, want %q", n.Get("text"), c.want)
			}
		})
	}
}

// TestClickOverSocketMode: the interactive envelope is acked, the click answered
// with the clicker's display name from users.info, and a refusal noticed.
func TestClickOverSocketMode(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = ModeSocket })
	e.engine.answerFn = func(a core.Answer) (core.AnswerResult, error) {
		if a.Actor != "slack:T0TEST:U0TEST001" {
			return core.AnswerResult{Outcome: core.AnswerForbidden, Question: approval(`{}`)}, nil
		}
		return core.AnswerResult{Outcome: core.AnswerAccepted}, nil
	}
	runAdapter(t, e.a)
	ctx := waitCtx(t)

	if err := e.slack.PushClick(ctx, "env-click-1", aliceApproves); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "env-click-1"); err != nil {
		t.Fatal(err)
	}
	got := e.engine.answers.Wait(t, 1)[0]
	if got.Token != "abcdefghijkl" || got.Choice != 0 || got.Actor != "slack:T0TEST:U0TEST001" || got.Name != "Alice" || got.Account != "slack/acme" {
		t.Errorf("answer %+v", got)
	}

	bob := aliceApproves
	bob.User, bob.UserName = "U0TEST002", "bob"
	if err := e.slack.PushClick(ctx, "env-click-2", bob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(ctx, "env-click-2"); err != nil {
		t.Fatal(err)
	}
	calls, err := e.slack.WaitCalls(ctx, "chat.postEphemeral", 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls[0].Form; n.Get("user") != "U0TEST002" || !strings.Contains(n.Get("text"), "Only approvers of @engineer") {
		t.Errorf("notice %v", n)
	}
	if got := e.engine.answers.All(); len(got) != 2 || got[1].Name != "Bob Example" {
		t.Errorf("bob's answer %+v", got[1:])
	}
}

// TestClickWithoutUserFailsClosed: a click with no identifiable user reaches the
// engine with an empty Actor (which refuses it) and no notice can be sent.
func TestClickWithoutUserFailsClosed(t *testing.T) {
	e := newEnv(t, nil)
	e.engine.answerFn = func(a core.Answer) (core.AnswerResult, error) {
		return core.AnswerResult{Outcome: core.AnswerForbidden}, nil
	}
	anon := aliceApproves
	anon.User, anon.UserName = "", ""
	if rec := e.click(t, anon, testSecret); rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if got := e.engine.answers.All(); len(got) != 1 || got[0].Actor != "" {
		t.Fatalf("answers %+v, want one with an empty actor", got)
	}
	e.a.bg.wait(5 * time.Second)
	if n := len(e.slack.CallsTo("chat.postEphemeral")); n != 0 {
		t.Errorf("notice to nobody: %d calls", n)
	}
}

func TestBackgroundBounded(t *testing.T) {
	b := newBackground(2)
	block := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // tasks run detached from the caller's cancellation
	var ran [3]bool
	for i := range 3 {
		ok := b.spawn(ctx, func(ctx context.Context) {
			if ctx.Err() == nil {
				ran[i] = true
			}
			<-block
		})
		if ok != (i < 2) {
			t.Errorf("spawn %d = %v", i, ok)
		}
	}
	if b.wait(10 * time.Millisecond) {
		t.Error("wait returned true with tasks blocked")
	}
	close(block)
	if !b.wait(5 * time.Second) {
		t.Fatal("tasks did not finish")
	}
	if !ran[0] || !ran[1] || ran[2] {
		t.Errorf("ran %v", ran)
	}
}
