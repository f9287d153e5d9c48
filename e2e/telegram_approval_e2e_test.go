package e2e

// End-to-end tests of approvals (DESIGN.md §5) on Telegram: the real engine, the real agent loop with
// the built-in shell tool behind an approval, the bbolt store, the Telegram adapter
// against the fake Bot API, and the fake OpenAI server. The model asks for
// `echo x >> ran.txt`, so the lines of ran.txt count how often the tool ran.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
	"openbot/core/storetest"
)

// People in the approval tests: Alice and Bob are approvers, Carol is not.
var (
	tgAlice = telegramtest.Clicker{ID: 1001, FirstName: "Alice", Username: "alice"}
	tgBob   = telegramtest.Clicker{ID: 1002, FirstName: "Bob", Username: "bob"}
	tgCarol = telegramtest.Clicker{ID: 1003, FirstName: "Carol", Username: "carol"}
)

const (
	tgApprovalToken = "tok-engineer"
	tgApprovalGroup = -1001000000077
	tgSecret        = "approval-secret"
)

// tgApprovalModel is the scripted model: after a tool result it reports it; a
// conversation with "ping" in it gets "pong"; anything else asks for the shell
// command.
func tgApprovalModel(r openaitest.Request) openaitest.Reply {
	ms := r.Body.Messages
	if last := ms[len(ms)-1]; last.Role == "tool" {
		return openaitest.Text("finished: " + strings.TrimSpace(last.Content))
	}
	for _, m := range ms[1:] {
		if m.Role == "user" && strings.Contains(m.Content, "ping") {
			return openaitest.Text("pong")
		}
	}
	return openaitest.Calls(openaitest.Call("shell", `{"command":"echo x >> ran.txt"}`))
}

// tgApprovalRig runs engine, agent and one Telegram account for the engineer bot
// (token tok-engineer, @engineer_bot), in polling or webhook mode. stop and start
// restart everything but the fakes, the database file and the workspace.
type tgApprovalRig struct {
	*tgRig
	t       *testing.T
	webhook bool
	llm     *openaitest.Server
	dbPath  string
	ws      string
	// clock and expiry, when set before start, drive question expiry.
	clock  *stepClock
	expiry time.Duration
	ad     *telegram.Adapter
	// policy adjusts the engine's people options after the rig's default,
	// which lets the asker approve (who may approve is people_telegram_e2e_test.go's).
	policy func(*core.Options)
	// dmPolicy is the account's dm_policy; default open.
	dmPolicy string
}

// startTelegramApproval starts the rig with the tgApprovalModel script; setup, when
// given, adjusts the rig (model script, clock) before anything starts.
func startTelegramApproval(t *testing.T, webhook bool, setup ...func(*tgApprovalRig)) *tgApprovalRig {
	t.Helper()
	dir := t.TempDir()
	r := &tgApprovalRig{
		tgRig: &tgRig{fake: telegramtest.NewServer(telegramtest.Bot{Token: tgApprovalToken, ID: 900, Username: "engineer_bot"})},
		t:     t, webhook: webhook,
		llm: openaitest.New(t), dbPath: filepath.Join(dir, "openbot.db"), ws: filepath.Join(dir, "ws"),
	}
	t.Cleanup(r.fake.Close)
	r.llm.Handle(tgApprovalModel)
	for _, f := range setup {
		f(r)
	}
	r.start()
	return r
}

func (r *tgApprovalRig) start() {
	t := r.t
	t.Helper()
	team := append([]core.BotProfile(nil), e2eTeam...)
	for i := range team {
		if team[i].Handle == "engineer" {
			team[i].Tools, team[i].ApprovalTools = []string{"shell"}, []string{"shell"}
		}
	}
	eo := core.Options{
		Agent: llmAgent(t, r.llm, builtins(t, tools.Options{WorkspaceRoot: r.ws, SharedWorkspace: true}), core.Limits{}), Bots: team,
		Approvers:   []core.ActorID{telegram.HumanActor(tgAlice.ID), telegram.HumanActor(tgBob.ID)},
		SelfApprove: true,
	}
	if r.policy != nil {
		r.policy(&eo)
	}
	if r.clock != nil {
		eo.Clock, eo.ApprovalTimeout, eo.ExpiryInterval = r.clock, r.expiry, 20*time.Millisecond
	}
	var more func(*proc, *telegram.Options)
	if r.webhook {
		more = func(_ *proc, o *telegram.Options) {
			o.Mode, o.WebhookURL, o.SecretToken = telegram.ModeWebhook, "https://bots.example.invalid/telegram/engineer/webhook", tgSecret
		}
	}
	r.tgRig = startTelegramWith(t, r.fake, r.dbPath, eo, more, telegram.Options{Name: "engineer", Bot: "engineer", Token: tgApprovalToken, DMPolicy: r.dmPolicy})
	r.ad = r.ads[0]
	waitFor(t, "the Telegram adapter to start", func() bool { _, ok := r.ad.Self(); return ok })
}

// push delivers an update like Telegram does (getUpdates or a webhook POST) and
// waits until the adapter confirmed it.
func (r *tgApprovalRig) push(update []byte) {
	r.t.Helper()
	if r.webhook {
		if code := r.post(update); code != http.StatusOK {
			r.t.Fatalf("webhook answered %d", code)
		}
		return
	}
	id, err := r.fake.PushUpdate(tgApprovalToken, update)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.fake.WaitConfirmed(ctx, tgApprovalToken, id+1); err != nil {
		r.t.Fatalf("update %d not confirmed: %v", id, err)
	}
}

func (r *tgApprovalRig) post(update []byte) int {
	req, err := telegramtest.WebhookRequest(context.Background(), r.hook.URL+telegram.WebhookPath("engineer"), tgSecret, update)
	if err != nil {
		r.t.Error(err)
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mention is a group message from Alice addressed to @engineer_bot.
func tgMention(msgID int64, chat int64, text string) []byte {
	full := "@engineer_bot " + text
	typ := "supergroup"
	if chat > 0 {
		typ = "private"
	}
	return []byte(fmt.Sprintf(`{"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Alice"},
"chat":{"id":%d,"type":%q},"date":1767225660,"text":%q,"entities":[{"offset":0,"length":13,"type":"mention"}]}}`,
		msgID, tgAlice.ID, chat, typ, full))
}

// question returns the only question, once its post has a platform id.
func (r *tgApprovalRig) question() core.Question {
	r.t.Helper()
	var qs []core.Question
	r.waitStore("a posted question", func(tx core.ReadTx) bool {
		qs, _ = tx.Questions(false, 0)
		return len(qs) == 1 && len(qs[0].Posts) == 1 && qs[0].Posts[0].PlatformID != "" || len(qs) > 1
	})
	if len(qs) > 1 {
		r.t.Fatalf("questions %+v, want one posted", qs)
	}
	return qs[0]
}

func (r *tgApprovalRig) run(id core.RunID) core.Run {
	r.t.Helper()
	return storetest.Read(r.t, r.st, func(tx core.ReadTx) (core.Run, error) { return tx.Run(id) })
}

// ranTimes is how often the approved shell command ran.
func (r *tgApprovalRig) ranTimes() int {
	b, err := os.ReadFile(filepath.Join(r.ws, "ran.txt"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "x\n")
}

// click clicks button data of question message msgID and returns the
// answerCallbackQuery parameters the clicker got.
func (r *tgApprovalRig) click(queryID string, who telegramtest.Clicker, msgID string, data string) map[string]string {
	r.t.Helper()
	var id int64
	fmt.Sscan(msgID, &id)
	r.push(telegramtest.CallbackUpdate(queryID, who, tgApprovalGroup, id, data))
	return r.ack(queryID)
}

// ack waits for the answerCallbackQuery of queryID.
func (r *tgApprovalRig) ack(queryID string) map[string]string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for n := 1; ; n++ {
		calls, err := r.fake.WaitCalls(ctx, "answerCallbackQuery", n)
		if err != nil {
			r.t.Fatalf("no answerCallbackQuery for %s", queryID)
		}
		for _, c := range calls {
			if c.Params["callback_query_id"] == queryID {
				return c.Params
			}
		}
	}
}

// questionCall is the sendMessage that posted the question (the one with buttons).
func (r *tgApprovalRig) questionCall() telegramtest.Call {
	r.t.Helper()
	var found []telegramtest.Call
	for _, c := range r.fake.Calls("sendMessage") {
		if telegramtest.Buttons(c) != nil {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		r.t.Fatalf("%d messages with buttons, want 1", len(found))
	}
	return found[0]
}

// sentTexts are the texts of every sendMessage to chat.
func (r *tgApprovalRig) sentTexts(chat int64) []string {
	var out []string
	for _, c := range r.fake.Calls("sendMessage") {
		if c.Params["chat_id"] == fmt.Sprint(chat) {
			out = append(out, c.Params["text"])
		}
	}
	return out
}

// asked posts the request, waits until the question is shown and checks that
// nothing ran yet; it returns the question and the callback data of Approve and
// Reject.
func (r *tgApprovalRig) asked() (q core.Question, approve, reject string) {
	r.t.Helper()
	r.push(tgMention(201, tgApprovalGroup, "please run the script"))
	r.idle()
	q = r.question()
	if q.Kind != core.QuestionApproval || q.Tool != "shell" || q.Status != core.QuestionPending {
		r.t.Fatalf("question %+v, want a pending approval of shell", q)
	}
	if got := r.run(q.Run).Status; got != core.RunWaitingHuman {
		r.t.Fatalf("run status %s, want waiting_human", got)
	}
	if n := r.ranTimes(); n != 0 {
		r.t.Fatalf("the tool ran %d times before anyone approved", n)
	}
	c := r.questionCall()
	if c.Params["chat_id"] != fmt.Sprint(tgApprovalGroup) || telegramtest.ParseReplyTo(c) != 201 {
		r.t.Errorf("question sent to %s replying to %d, want the group, replying to 201", c.Params["chat_id"], telegramtest.ParseReplyTo(c))
	}
	if !strings.Contains(c.Params["text"], "shell") || !strings.Contains(c.Params["text"], "echo x &gt;&gt; ran.txt") {
		r.t.Errorf("question text %q lacks the tool and its arguments", c.Params["text"])
	}
	rows := telegramtest.Buttons(c)
	if len(rows) != 1 || len(rows[0]) != 2 || rows[0][0].Text != "Approve" || rows[0][1].Text != "Reject" {
		r.t.Fatalf("keyboard %+v, want [Approve Reject]", rows)
	}
	for i, b := range rows[0] {
		if want := fmt.Sprintf("q:%s:%d", q.Token, i); b.CallbackData != want || len(b.CallbackData) > telegram.MaxCallbackData {
			r.t.Errorf("button %d callback_data %q (%d bytes), want %q within 64 bytes", i, b.CallbackData, len(b.CallbackData), want)
		}
	}
	return q, rows[0][0].CallbackData, rows[0][1].CallbackData
}

// resolved checks that the question message now shows want instead of buttons.
func (r *tgApprovalRig) resolved(q core.Question, want string) {
	r.t.Helper()
	var edits []telegramtest.Call
	for _, c := range r.fake.Calls("editMessageText") {
		if c.Params["message_id"] == q.Posts[0].PlatformID && c.Params["chat_id"] == fmt.Sprint(tgApprovalGroup) {
			edits = append(edits, c)
		}
	}
	if len(edits) != 1 {
		r.t.Fatalf("%d edits of the question message, want 1", len(edits))
	}
	if !strings.Contains(edits[0].Params["text"], want) || telegramtest.Buttons(edits[0]) != nil {
		r.t.Errorf("edited to %q with buttons %v, want %q and no buttons", edits[0].Params["text"], telegramtest.Buttons(edits[0]), want)
	}
}

// completed checks the run finished under its original id and the reply landed.
func (r *tgApprovalRig) completed(q core.Question, reply string) {
	r.t.Helper()
	if got := r.run(q.Run).Status; got != core.RunCompleted {
		r.t.Errorf("run %d status %s, want completed", q.Run, got)
	}
	texts := r.sentTexts(tgApprovalGroup)
	if len(texts) == 0 || !strings.Contains(texts[len(texts)-1], reply) {
		r.t.Errorf("messages to the group %q, want the last to contain %q", texts, reply)
	}
}

// approvedByAlice clicks approve as Alice with callback id cb and checks the
// whole outcome: a toast (not an alert) saying so, the tool run once, the
// decision shown on the question and the run's reply.
func (r *tgApprovalRig) approvedByAlice(cb string, q core.Question, approve string) {
	r.t.Helper()
	if ack := r.click(cb, tgAlice, q.Posts[0].PlatformID, approve); ack["text"] != "Approved" || ack["show_alert"] == "true" {
		r.t.Errorf("answerCallbackQuery %v, want a toast Approved", ack)
	}
	r.idle()
	if n := r.ranTimes(); n != 1 {
		r.t.Fatalf("the approved tool ran %d times, want 1", n)
	}
	r.resolved(q, "Approved by Alice")
	r.completed(q, "finished:")
}

func TestTelegramApprovalApprove(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, approve, _ := r.asked()
	r.approvedByAlice("cb-1", q, approve)
}

func TestTelegramApprovalNonApproverRefused(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, approve, _ := r.asked()
	ack := r.click("cb-1", tgCarol, q.Posts[0].PlatformID, approve)
	if ack["text"] != "Only approvers of @engineer can answer this." || ack["show_alert"] != "true" {
		t.Errorf("answerCallbackQuery %v, want the refusal alert", ack)
	}
	r.idle()
	if n := r.ranTimes(); n != 0 {
		t.Fatalf("a non-approver's click ran the tool %d times", n)
	}
	if edits := r.fake.Calls("editMessageText"); len(edits) != 0 {
		t.Fatalf("the question message changed after a refused click: %v", edits[0].Params)
	}
	if got := r.run(q.Run).Status; got != core.RunWaitingHuman {
		t.Fatalf("run status %s after a refused click, want waiting_human", got)
	}
	r.approvedByAlice("cb-2", q, approve)
}

func TestTelegramApprovalSecondClickTold(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, approve, reject := r.asked()
	r.click("cb-1", tgAlice, q.Posts[0].PlatformID, approve)
	// The same person again, and another approver choosing the other button.
	for i, c := range []struct {
		who  telegramtest.Clicker
		data string
	}{{tgAlice, approve}, {tgBob, reject}} {
		ack := r.click(fmt.Sprintf("cb-late-%d", i), c.who, q.Posts[0].PlatformID, c.data)
		if ack["text"] != "Already decided: Approved by Alice" || ack["show_alert"] != "true" {
			t.Errorf("late click %d: answerCallbackQuery %v, want the earlier decision", i, ack)
		}
	}
	r.idle()
	if n := r.ranTimes(); n != 1 {
		t.Fatalf("the tool ran %d times after three clicks, want 1", n)
	}
	r.resolved(q, "Approved by Alice")
	r.completed(q, "finished:")
}

// TestTelegramApprovalConcurrentClicks: two approvers click Approve at the same
// moment (webhook mode, two requests in flight): one wins, the other is told.
func TestTelegramApprovalConcurrentClicks(t *testing.T) {
	r := startTelegramApproval(t, true)
	q, approve, _ := r.asked()
	var msgID int64
	fmt.Sscan(q.Posts[0].PlatformID, &msgID)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, who := range []telegramtest.Clicker{tgAlice, tgBob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = r.post(telegramtest.CallbackUpdate(fmt.Sprintf("cb-%d", i), who, tgApprovalGroup, msgID, approve))
		}()
	}
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("webhook answers %v, want 200 200", codes)
	}
	acks := []map[string]string{r.ack("cb-0"), r.ack("cb-1")}
	winner, loser := acks[0], acks[1]
	name := "Alice"
	if winner["text"] != "Approved" {
		winner, loser, name = loser, winner, "Bob"
	}
	if winner["text"] != "Approved" || loser["text"] != "Already decided: Approved by "+name || loser["show_alert"] != "true" {
		t.Fatalf("answers %v and %v, want one Approved and one told it was decided", acks[0], acks[1])
	}
	r.idle()
	if n := r.ranTimes(); n != 1 {
		t.Fatalf("the tool ran %d times after two concurrent approvals, want 1", n)
	}
	r.resolved(q, "Approved by "+name)
	r.completed(q, "finished:")
}

// TestTelegramApprovalAcrossRestart: openbot restarts between the question and the
// click; the old buttons still work and the tool runs once.
func TestTelegramApprovalAcrossRestart(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, approve, _ := r.asked()
	r.stop()
	r.start()
	r.idle()
	if n := r.ranTimes(); n != 0 {
		t.Fatalf("the tool ran %d times during the restart", n)
	}
	if got := r.run(q.Run).Status; got != core.RunWaitingHuman {
		t.Fatalf("run status %s after restart, want waiting_human", got)
	}
	r.approvedByAlice("cb-1", q, approve)
	if n := len(r.fake.Calls("sendMessage")); n != 2 {
		t.Errorf("%d messages sent, want 2 (the question once, the reply)", n)
	}
}

func TestTelegramApprovalReject(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, _, reject := r.asked()
	if ack := r.click("cb-1", tgBob, q.Posts[0].PlatformID, reject); ack["text"] != "Rejected" {
		t.Errorf("answerCallbackQuery %v, want Rejected", ack)
	}
	r.idle()
	if n := r.ranTimes(); n != 0 {
		t.Fatalf("a rejected tool ran %d times", n)
	}
	wantToolResult(t, r.llm, "rejected by Bob")
	r.resolved(q, "Rejected by Bob")
	r.completed(q, "rejected by Bob")
}

// TestTelegramApprovalParksOnlyItsThread: while the question waits, a new message
// for the engineer in the same group waits too, and a message in another chat is
// answered; after the approval both are done, in order.
func TestTelegramApprovalParksOnlyItsThread(t *testing.T) {
	r := startTelegramApproval(t, false)
	q, approve, _ := r.asked()
	calls := len(r.llm.Requests())
	r.push(tgMention(202, tgApprovalGroup, "ping from the group"))
	r.push(tgMention(300, int64(tgAlice.ID), "ping from a private chat"))
	r.idle()
	if got := r.sentTexts(tgAlice.ID); len(got) != 1 || !strings.Contains(got[0], "pong") {
		t.Fatalf("private chat got %q, want pong while the group's thread is parked", got)
	}
	if n := len(r.llm.Requests()); n != calls+1 {
		t.Fatalf("%d model calls while parked, want %d (only the private chat)", n, calls+1)
	}
	if texts := r.sentTexts(tgApprovalGroup); len(texts) != 1 {
		t.Fatalf("the parked group got %q, want only the question", texts)
	}
	r.click("cb-1", tgAlice, q.Posts[0].PlatformID, approve)
	r.idle()
	if n := r.ranTimes(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	texts := r.sentTexts(tgApprovalGroup)
	if len(texts) != 3 || !strings.Contains(texts[1], "finished:") || !strings.Contains(texts[2], "pong") {
		t.Fatalf("group messages %q, want the question, the finished reply, then pong", texts)
	}
	if got := r.run(q.Run).Status; got != core.RunCompleted {
		t.Errorf("run status %s, want completed", got)
	}
}

// TestTelegramApprovalExpires: an approval nobody answers expires after
// approval_timeout: it counts as a rejection, the message says so, the run goes on,
// and a late click is told.
func TestTelegramApprovalExpires(t *testing.T) {
	r := startTelegramApproval(t, false, func(r *tgApprovalRig) {
		r.clock, r.expiry = &stepClock{now: time.Now()}, time.Hour
	})
	q, approve, _ := r.asked()
	r.clock.advance(2 * time.Hour)
	r.waitStore("the question to expire two hours after a one-hour timeout", func(tx core.ReadTx) bool {
		cur, err := tx.Question(q.ID)
		return err == nil && cur.Status == core.QuestionExpired
	})
	r.idle()
	if n := r.ranTimes(); n != 0 {
		t.Fatalf("an expired approval ran the tool %d times", n)
	}
	wantToolResult(t, r.llm, "expired")
	r.resolved(q, "Expired without an answer: rejected")
	r.completed(q, "finished:")
	ack := r.click("cb-late", tgAlice, q.Posts[0].PlatformID, approve)
	if ack["text"] != "Already decided: Expired without an answer: rejected" || ack["show_alert"] != "true" {
		t.Errorf("late click: answerCallbackQuery %v, want the expiry", ack)
	}
}

// TestTelegramAskHumanFreeText: ask_human without choices shows no buttons; a
// reply to the question in the group answers it and the run resumes with the text.
func TestTelegramAskHumanFreeText(t *testing.T) {
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
	if q.Kind != core.QuestionAsk || len(q.Options()) != 0 {
		t.Fatalf("question %+v, want a free-text ask", q)
	}
	sends := r.fake.Calls("sendMessage")
	if len(sends) != 1 || telegramtest.Buttons(sends[0]) != nil || !strings.Contains(sends[0].Params["text"], "Which branch should I deploy?") ||
		!strings.Contains(sends[0].Params["text"], "Reply to this message to answer.") {
		t.Fatalf("sent %v, want the question without buttons, asking for a reply", sends)
	}
	r.push([]byte(fmt.Sprintf(`{"message":{"message_id":203,"from":{"id":%d,"is_bot":false,"first_name":"Alice"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225700,"text":"release-2.4",
"reply_to_message":{"message_id":%s,"from":{"id":900,"is_bot":true,"first_name":"engineer_bot","username":"engineer_bot"},
"chat":{"id":%d,"type":"supergroup"},"date":1767225690,"text":"Which branch should I deploy?"}}}`,
		tgAlice.ID, tgApprovalGroup, q.Posts[0].PlatformID, tgApprovalGroup)))
	r.idle()
	wantToolResult(t, r.llm, "release-2.4")
	r.resolved(q, "Answered by Alice: release-2.4")
	r.completed(q, "deploying")
}
