package e2e

// End-to-end tests of approvals (DESIGN.md §5) on Feishu: the real engine, the real agent loop with
// the built-in shell tool under approval, the bbolt store, the fake OpenAI server
// and the fake Feishu Open API. Approval cards are clicked through the card
// callback URL, signed as the platform signs them.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
)

const (
	fsCarol    = "ou_c0ffee00000000000000000000000001" // in the thread, not an approver
	fsRootMsg  = "om_e2e00000000000000000000000000001"
	fsBobMsg   = "om_e2e00000000000000000000000000002" // Bob's message in the topic
	fsRunIt    = "please run it"
	fsShellCmd = `{"command":"echo x >> ran.txt"}`
)

// fsRig is one openbot process (engine, agent, store, Feishu app) that can be
// stopped and started again over the same database, workspace and fake servers.
type fsRig struct {
	*fsmRig
	t    *testing.T
	llm  *openaitest.Server
	db   string
	work string
	// policy adjusts the engine's people options after the rig's default,
	// which lets the asker approve (who may approve is people_feishu_e2e_test.go's).
	policy func(*core.Options)
	// dmPolicy is the app's dm_policy (default pairing, Alice on allow_users).
	dmPolicy string
}

// fsModel asks for the shell when the newest message of the run asks to run it,
// reports a tool result, and answers anything else with a short text.
func fsModel(r openaitest.Request) openaitest.Reply {
	ms := r.Body.Messages
	if last := ms[len(ms)-1]; last.Role == "tool" {
		return openaitest.Text("done: " + last.Content)
	}
	u := newestTrigger(r)
	switch {
	case strings.Contains(u, fsRunIt):
		return openaitest.Calls(openaitest.Call("shell", fsShellCmd))
	case strings.Contains(u, "which branch"):
		return openaitest.Calls(openaitest.Call("ask_human", `{"question":"Which branch?"}`))
	case strings.Contains(u, "pick a db"):
		return openaitest.Calls(openaitest.Call("ask_human", `{"question":"Which database?","choices":["Postgres","SQLite"]}`))
	case strings.Contains(u, "check the logs"):
		return openaitest.Text("logs look fine")
	}
	return openaitest.Text("noted")
}

// newestTrigger is the last message marked "(new)" in the request's user turns:
// the agent marks the messages that triggered the run so. (A message that arrived
// while the run waited for approval comes before the resumed run's reply, and the
// next run then ends with a "nothing new" note after it.)
func newestTrigger(r openaitest.Request) string {
	ms := r.Body.Messages
	for i := len(ms) - 1; i >= 0; i-- {
		if j := strings.LastIndex(ms[i].Content, "(new): "); ms[i].Role == "user" && j >= 0 {
			return ms[i].Content[j:]
		}
	}
	return ""
}

func newFeishuRig(t *testing.T) *fsRig { return newFeishuRigMode(t, feishu.ModeWebhook) }

func newFeishuRigMode(t *testing.T, mode string, setup ...func(*fsRig)) *fsRig {
	t.Helper()
	dir := t.TempDir()
	r := &fsRig{fsmRig: &fsmRig{fake: feishutest.New(t), mode: mode}, t: t, llm: openaitest.New(t),
		db: filepath.Join(dir, "openbot.db"), work: filepath.Join(dir, "work")}
	r.llm.Handle(fsModel)
	for _, f := range setup {
		f(r)
	}
	r.start()
	return r
}

// start runs the engine and the Feishu app over the rig's files until stop.
func (r *fsRig) start() {
	r.t.Helper()
	team := []core.BotProfile{
		{Handle: "engineer", Name: "Engineer", Description: "writes code", Tools: []string{"shell"}, ApprovalTools: []string{"shell"}},
		{Handle: "reviewer", Name: "Reviewer", Description: "reviews code"},
	}
	reg := builtins(r.t, tools.Options{WorkspaceRoot: r.work, SharedWorkspace: true}, "shell")
	eo := core.Options{Agent: llmAgent(r.t, r.llm, reg, core.Limits{}), Bots: team,
		Approvers:   []core.ActorID{feishu.ActorID(feishutest.AliceOpenID), feishu.ActorID(feishutest.BobOpenID)},
		SelfApprove: true}
	if r.policy != nil {
		r.policy(&eo)
	}
	r.fsmRig = startFeishu(r.t, r.fake, r.db, r.mode, eo, func(o *feishu.Options) { o.DMPolicy = r.dmPolicy })
}

// restart stops the process and starts a new one over the same files.
func (r *fsRig) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// event POSTs a message event, encrypted and signed, to the events URL, or sends
// it over the long connection, and checks that it was acknowledged.
func (r *fsRig) event(ev feishutest.MessageEvent) {
	r.t.Helper()
	if r.mode == feishu.ModeWebsocket {
		id, err := r.fake.PushEvent(r.ctx(), ev.JSON(), 1)
		if err != nil {
			r.t.Fatal(err)
		}
		if ack, err := r.fake.WaitAck(r.ctx(), id); err != nil || ack.Code != 200 {
			r.t.Fatalf("event %s: ack %+v, %v", ev.MessageID, ack, err)
		}
		return
	}
	r.post(ev)
}

// mention starts the topic thread fsRootMsg with "@engineer please run it".
func (r *fsRig) mention() {
	r.event(feishutest.MessageEvent{MessageID: fsRootMsg, Text: "@_user_1 " + fsRunIt, Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
}

// card waits for the approval card and returns it.
func (r *fsRig) card() feishutest.Message {
	r.t.Helper()
	return r.waitMessage("approval card", func(m feishutest.Message) bool { return len(m.Buttons()) > 0 })
}

// click presses the button labelled label on card m as openID and returns the
// toast of the card callback response.
func (r *fsRig) click(m feishutest.Message, label, openID string) feishu.Toast {
	r.t.Helper()
	b, ok := m.Button(label)
	if !ok {
		r.t.Fatalf("card has no %q button: %s", label, m.Content)
	}
	payload := feishutest.CardAction{OpenID: openID, MessageID: m.ID, Value: b.Value}.JSON()
	code, body, err := feishuCall(r.hook.URL+"/feishu/acme/card", payload)
	var cr feishu.CardResponse
	if err != nil || code != 200 || json.Unmarshal(body, &cr) != nil || cr.Toast == nil {
		r.t.Errorf("card callback: HTTP %d %s %v", code, body, err)
		return feishu.Toast{}
	}
	return *cr.Toast
}

// clickWS presses a button over the long connection in a data frame of frameType
// ("event" or "card") and returns the toast in the ack, nil when it has none.
func (r *fsRig) clickWS(m feishutest.Message, label, openID, frameType string) *feishu.Toast {
	r.t.Helper()
	b, ok := m.Button(label)
	if !ok {
		r.t.Fatalf("card has no %q button: %s", label, m.Content)
	}
	id, err := r.fake.PushCard(r.ctx(), feishutest.CardAction{OpenID: openID, MessageID: m.ID, Value: b.Value}.JSON(), frameType)
	if err != nil {
		r.t.Fatal(err)
	}
	ack, err := r.fake.WaitAck(r.ctx(), id)
	if err != nil || ack.Code != 200 {
		r.t.Fatalf("card click ack %+v, %v", ack, err)
	}
	if ack.Data == nil {
		return nil
	}
	var cr feishu.CardResponse
	if err := json.Unmarshal(ack.Data, &cr); err != nil {
		r.t.Fatalf("ack data %q: %v", ack.Data, err)
	}
	return cr.Toast
}

// ran is how many times the shell command ran.
func (r *fsRig) ran() int {
	b, err := os.ReadFile(filepath.Join(r.work, "ran.txt"))
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "x\n")
}

// waitText waits until a message whose text contains substr was sent, and
// returns it.
func (r *fsRig) waitText(substr string) feishutest.Message {
	r.t.Helper()
	return r.waitMessage("message containing "+substr, func(m feishutest.Message) bool { return strings.Contains(m.Text(), substr) })
}

// waitPatch waits for the card update of message id and returns its content.
func (r *fsRig) waitPatch(id string) string {
	r.t.Helper()
	ctx := r.ctx()
	for n := 1; ; n++ {
		ps, err := r.fake.WaitPatches(ctx, n)
		if err != nil {
			r.t.Fatalf("card %s never updated; patches %+v", id, ps)
		}
		for _, p := range ps {
			if p.MessageID == id {
				return p.Content
			}
		}
		n = len(ps)
	}
}

// checkApprovedOnce asserts the end state after an approval of the card: the tool
// ran once, the reply landed in the topic, the card shows the decision.
func (r *fsRig) checkApprovedOnce(card feishutest.Message, by string) {
	r.t.Helper()
	reply := r.waitText("done: ")
	if reply.Kind != "reply" || !reply.InThread || reply.ThreadID == "" || reply.ThreadID != card.ThreadID {
		r.t.Errorf("reply %+v is not in the card's topic %q", reply, card.ThreadID)
	}
	r.idle()
	if n := r.ran(); n != 1 {
		r.t.Errorf("shell ran %d times, want 1", n)
	}
	patched := r.waitPatch(card.ID)
	if b := feishutest.CardButtons(patched); len(b) != 0 {
		r.t.Errorf("patched card still has buttons: %s", patched)
	}
	if text := feishutest.CardText(patched); !strings.Contains(text, "Approved by "+by) {
		r.t.Errorf("patched card says %q, want Approved by %s", text, by)
	}
	qs, err := r.eng.Questions(r.ctx(), false)
	if err != nil || len(qs) != 1 || !qs[0].Approved() || qs[0].AnsweredBy != feishu.ActorID(map[string]string{"Alice": feishutest.AliceOpenID, "Bob": feishutest.BobOpenID}[by]) {
		r.t.Errorf("questions %+v, %v", qs, err)
	}
}

func TestFeishuApprovalApproveRunsToolOnce(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()
	if card.Kind != "reply" || !card.InThread || card.ReplyTo != fsRootMsg {
		t.Errorf("card %+v is not in the topic of %s", card, fsRootMsg)
	}
	if text := feishutest.CardText(card.Content); !strings.Contains(text, "shell") || !strings.Contains(text, "echo x >> ran.txt") {
		t.Errorf("card text %q", text)
	}
	if r.ran() != 0 {
		t.Fatal("the shell ran before approval")
	}
	if toast := r.click(card, "Approve", feishutest.AliceOpenID); toast.Type != "success" || toast.Content != "Recorded" {
		t.Errorf("approve toast %+v", toast)
	}
	r.checkApprovedOnce(card, "Alice")
	// A second approver clicks later: told privately, nothing runs again.
	if toast := r.click(card, "Reject", feishutest.BobOpenID); toast.Type != "info" || toast.Content != "Already decided: Approved by Alice" {
		t.Errorf("late click toast %+v", toast)
	}
	r.idle()
	if n := r.ran(); n != 1 {
		t.Errorf("shell ran %d times after a late click", n)
	}
}

func TestFeishuApprovalNonApproverRefused(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()
	if toast := r.click(card, "Approve", fsCarol); toast.Type != "error" || toast.Content != "Only approvers of @engineer can answer this." {
		t.Errorf("non-approver toast %+v", toast)
	}
	r.idle()
	if n, ps := r.ran(), r.fake.Patches(); n != 0 || len(ps) != 0 {
		t.Fatalf("after a refused click: shell ran %d times, %d card patches", n, len(ps))
	}
	qs, _ := r.eng.Questions(r.ctx(), true)
	if len(qs) != 1 {
		t.Fatalf("pending questions %+v", qs)
	}
	if toast := r.click(card, "Approve", feishutest.BobOpenID); toast.Content != "Recorded" {
		t.Errorf("approver toast %+v", toast)
	}
	r.checkApprovedOnce(card, "Bob")
}

func TestFeishuApprovalConcurrentClicks(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()
	toasts := make([]feishu.Toast, 2)
	var wg sync.WaitGroup
	for i, who := range []string{feishutest.AliceOpenID, feishutest.BobOpenID} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toasts[i] = r.click(card, "Approve", who)
		}()
	}
	wg.Wait()
	winner, recorded, decided := "", 0, 0
	for i, tt := range toasts {
		switch {
		case tt.Type == "success" && tt.Content == "Recorded":
			recorded++
			winner = []string{"Alice", "Bob"}[i]
		case tt.Type == "info" && strings.HasPrefix(tt.Content, "Already decided: Approved by "):
			decided++
		}
	}
	if recorded != 1 || decided != 1 {
		t.Fatalf("toasts %+v: want one Recorded and one Already decided", toasts)
	}
	r.checkApprovedOnce(card, winner)
}

func TestFeishuApprovalSurvivesRestart(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()
	r.restart()
	if n := r.ran(); n != 0 {
		t.Fatalf("the shell ran %d times across the restart before approval", n)
	}
	if toast := r.click(card, "Approve", feishutest.AliceOpenID); toast.Content != "Recorded" {
		t.Errorf("approve toast after restart %+v", toast)
	}
	r.checkApprovedOnce(card, "Alice")
	cards := 0
	for _, m := range r.fake.Messages() {
		if len(m.Buttons()) > 0 {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d approval cards posted, want 1 across the restart", cards)
	}
}

func TestFeishuApprovalRejectTellsTheModel(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()
	if toast := r.click(card, "Reject", feishutest.AliceOpenID); toast.Content != "Recorded" {
		t.Errorf("reject toast %+v", toast)
	}
	r.waitText("done: ")
	r.idle()
	if n := r.ran(); n != 0 {
		t.Errorf("a rejected shell ran %d times", n)
	}
	wantToolResult(t, r.llm, "rejected by")
	if text := feishutest.CardText(r.waitPatch(card.ID)); !strings.Contains(text, "Rejected by Alice") {
		t.Errorf("patched card %q", text)
	}
}

func TestFeishuApprovalParksOnlyThatTopic(t *testing.T) {
	r := newFeishuRig(t)
	r.mention()
	card := r.card()

	// Bob adds to the topic while the question waits: stored, not answered yet.
	r.event(feishutest.MessageEvent{MessageID: fsBobMsg, RootID: fsRootMsg, ParentID: fsRootMsg,
		Sender: feishutest.BobOpenID, Text: "@_user_1 also check the logs", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
	// Alice asks in a direct chat: answered while the topic is parked.
	r.event(feishutest.MessageEvent{MessageID: "om_e2e00000000000000000000000000003", ChatID: feishutest.P2PChat, ChatType: "p2p", Text: "what is the status?"})
	dm := r.waitText("noted")
	if dm.ReplyTo != "om_e2e00000000000000000000000000003" || dm.InThread {
		t.Errorf("direct answer %+v", dm)
	}
	r.idle()
	for _, q := range r.llm.Requests() {
		if strings.Contains(lastUser(q), "also check the logs") {
			t.Fatal("the parked topic's new message was answered before the approval")
		}
	}
	if n := r.ran(); n != 0 {
		t.Fatal("the shell ran before approval")
	}

	if toast := r.click(card, "Approve", feishutest.AliceOpenID); toast.Content != "Recorded" {
		t.Errorf("approve toast %+v", toast)
	}
	r.checkApprovedOnce(card, "Alice")
	defer func() {
		if t.Failed() {
			for i, q := range r.llm.Requests() {
				for _, m := range q.Body.Messages[1:] {
					t.Logf("req %d %s: %.300q", i, m.Role, m.Content)
				}
			}
		}
	}()
	logs := r.waitText("logs look fine")
	// Replying in thread to a message of the topic lands in the topic.
	if !logs.InThread || (logs.ReplyTo != fsBobMsg && logs.ReplyTo != fsRootMsg) {
		t.Errorf("the answer to the waiting message %+v is not in the topic of %s", logs, fsRootMsg)
	}
	r.idle()
	if n := r.ran(); n != 1 {
		t.Errorf("shell ran %d times", n)
	}
}

func TestFeishuApprovalOverLongConnection(t *testing.T) {
	r := newFeishuRigMode(t, feishu.ModeWebsocket)
	r.mention()
	card := r.card()
	// A type=event frame: the toast comes back in the ack.
	if toast := r.clickWS(card, "Approve", fsCarol, "event"); toast == nil || toast.Type != "error" || toast.Content != "Only approvers of @engineer can answer this." {
		t.Errorf("non-approver toast %+v", toast)
	}
	r.idle()
	if r.ran() != 0 {
		t.Fatal("the shell ran after a refused click")
	}
	// A type=card frame: acked without a toast, the approval counts.
	if toast := r.clickWS(card, "Approve", feishutest.BobOpenID, "card"); toast != nil {
		t.Errorf("toast %+v in the ack of a type=card frame", toast)
	}
	r.checkApprovedOnce(card, "Bob")
	if toast := r.clickWS(card, "Reject", feishutest.AliceOpenID, "event"); toast == nil || toast.Content != "Already decided: Approved by Bob" {
		t.Errorf("late click toast %+v", toast)
	}
}

func TestFeishuAskHumanFreeTextAnsweredInTopic(t *testing.T) {
	r := newFeishuRig(t)
	r.event(feishutest.MessageEvent{MessageID: fsRootMsg, Text: "@_user_1 which branch should I use?", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
	q := r.waitText("Which branch?")
	if len(q.Buttons()) != 0 || !strings.Contains(feishutest.CardText(q.Content), "Reply in this topic") || !q.InThread {
		t.Errorf("free-text question card %+v", q)
	}
	r.idle()
	// Bob answers by replying in the topic, without a mention.
	r.event(feishutest.MessageEvent{MessageID: fsBobMsg, RootID: fsRootMsg, ParentID: fsRootMsg, Sender: feishutest.BobOpenID, Text: "release-2.1"})
	done := r.waitText("done: ")
	if !strings.Contains(done.Text(), "release-2.1") || !done.InThread {
		t.Errorf("reply after the answer %+v", done)
	}
	if text := feishutest.CardText(r.waitPatch(q.ID)); !strings.Contains(text, "Answered by Bob: release-2.1") {
		t.Errorf("patched question %q", text)
	}
	r.idle()
}

func TestFeishuAskHumanChoiceButton(t *testing.T) {
	r := newFeishuRig(t)
	r.event(feishutest.MessageEvent{MessageID: fsRootMsg, Text: "@_user_1 pick a db for me", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
	card := r.card()
	if b := card.Buttons(); len(b) != 2 || b[0].Text != "Postgres" || b[1].Text != "SQLite" {
		t.Fatalf("choice buttons %+v", b)
	}
	if toast := r.click(card, "SQLite", feishutest.AliceOpenID); toast.Content != "Recorded" {
		t.Errorf("toast %+v", toast)
	}
	if done := r.waitText("done: "); !strings.Contains(done.Text(), "SQLite") {
		t.Errorf("reply after the choice %q", done.Text())
	}
	if text := feishutest.CardText(r.waitPatch(card.ID)); !strings.Contains(text, "Answered by Alice: SQLite") {
		t.Errorf("patched card %q", text)
	}
	r.idle()
}
