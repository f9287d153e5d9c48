package e2e

// End-to-end tests of human in the loop (DESIGN.md §5) on Slack: the real engine, the real agent loop with
// the built-in shell tool behind an approval, the bbolt store, the fake OpenAI
// server and the fake Slack, clicked through signed interactivity POSTs.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
	"openbot/core/storetest"
)

// Slack people of the approval tests (fixture ids; alice and carol approve).
const (
	slackAlice = "U0TEST001"
	slackBob   = "U0TEST002"
	slackCarol = "U0TEST003"
	slackRoot  = "1767225600.000100" // ts of the thread's first message
)

// slackUserNames are the usernames block_actions payloads carry for them.
var slackUserNames = map[string]string{slackAlice: "alice", slackBob: "bob", slackCarol: "carol"}

func slackActor(user string) core.ActorID { return slack.HumanActor(slacktest.DefaultTeam, user) }

// Triggers the engineer's model reacts to: run the script (shell, behind an
// approval), which branch (a free-text ask_human), pick an environment (ask_human
// with choices).
var (
	wantsShell = regexp.MustCompile(`\(new\): [^\n]*run the script`)
	wantsAsk   = regexp.MustCompile(`\(new\): [^\n]*which branch`)
	wantsPick  = regexp.MustCompile(`\(new\): [^\n]*pick an environment`)
)

// approvalModel is the engineer's model: asked to run the script it calls shell;
// given the tool's result it reports it; anything else gets a short text. Other
// bots answer "<bot> here".
func approvalModel(r openaitest.Request) openaitest.Reply {
	bot := botOf(r)
	if bot != "engineer" {
		return openaitest.Text(bot + " here")
	}
	ms := r.Body.Messages
	if last := ms[len(ms)-1]; last.Role == "tool" {
		if prev := ms[len(ms)-2]; len(prev.ToolCalls) > 0 && prev.ToolCalls[0].Function.Name == "ask_human" {
			return openaitest.Text("Going with the answer: " + last.Content)
		}
		if strings.Contains(strings.ToLower(last.Content), "reject") {
			return openaitest.Text("Understood, I did not run it.")
		}
		return openaitest.Text("Done: the script ran.")
	}
	switch u := lastUser(r); {
	case wantsShell.MatchString(u):
		return openaitest.Calls(openaitest.Call("shell", `{"command":"echo x >> ran.txt"}`))
	case wantsAsk.MatchString(u):
		return openaitest.Calls(openaitest.Call("ask_human", `{"question":"Which branch should I build?"}`))
	case wantsPick.MatchString(u):
		return openaitest.Calls(openaitest.Call("ask_human", `{"question":"Deploy where?","choices":["staging","prod"]}`))
	}
	return openaitest.Text("engineer: nothing to run here")
}

// approvalRig is one openbot process (engine, agent, Slack app in HTTP mode) that
// can be stopped and started again on the same store file, against one fake Slack
// and one fake model that outlive it.
type approvalRig struct {
	fake  *slacktest.Server
	model *openaitest.Server
	db    string
	work  string
	team  []core.BotProfile
	appr  []core.ActorID
	// expireAfter and expireEvery, when set, are the engine's ApprovalTimeout and
	// ExpiryInterval.
	expireAfter, expireEvery time.Duration
	// socket runs the Slack app in Socket Mode: events and clicks arrive as
	// envelopes over the fake's websocket instead of signed POSTs.
	socket bool
	// policy adjusts the engine's people options after the rig's default,
	// which lets the asker approve (these tests are about how approvals work;
	// who may approve is people_slack_e2e_test.go's).
	policy func(*core.Options)
	// dmPolicy is the Slack account's dm_policy; default open.
	dmPolicy string
	// more makes adapters of other platforms that run beside the Slack app.
	more func(*proc) []core.Adapter
	// fetchHosts is the built-in tools' FetchAllowHosts (http_fetch is
	// registered beside shell; a bot uses it only when its Tools name it).
	fetchHosts []string

	*proc
}

// startApproval starts a rig whose engineer has shell behind an approval; botAppr
// are the engineer's own approvers, globalAppr the engine's; opts adjust the rig
// before it starts.
func startApproval(t *testing.T, botAppr, globalAppr []core.ActorID, opts ...func(*approvalRig)) *approvalRig {
	t.Helper()
	r := &approvalRig{
		fake:  slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"}),
		model: openaitest.New(t),
		db:    filepath.Join(t.TempDir(), "openbot.db"),
		work:  t.TempDir(),
		appr:  globalAppr,
	}
	t.Cleanup(r.fake.Close)
	r.fake.AddUser(slacktest.User{ID: slackAlice, Name: "alice", RealName: "Alice Example", DisplayName: "Alice"})
	r.fake.AddUser(slacktest.User{ID: slackBob, Name: "bob", RealName: "Bob Example", DisplayName: "Bob"})
	r.fake.AddUser(slacktest.User{ID: slackCarol, Name: "carol", RealName: "Carol Example", DisplayName: "Carol"})
	r.model.Handle(approvalModel)
	for _, b := range e2eTeam {
		if b.Handle == "engineer" {
			b.Tools, b.ApprovalTools, b.Approvers = []string{"shell"}, []string{"shell"}, botAppr
		}
		r.team = append(r.team, b)
	}
	for _, o := range opts {
		o(r)
	}
	r.start(t)
	return r
}

// start runs a fresh engine, agent and Slack adapter over the store file.
func (r *approvalRig) start(t *testing.T) {
	t.Helper()
	eo := core.Options{Agent: llmAgent(t, r.model, builtins(t, tools.Options{WorkspaceRoot: r.work, FetchAllowHosts: r.fetchHosts}, "shell", "http_fetch"), core.Limits{}),
		Bots: r.team, Approvers: r.appr, ApprovalTimeout: r.expireAfter, ExpiryInterval: r.expireEvery, SelfApprove: true}
	if r.policy != nil {
		r.policy(&eo)
	}
	r.proc = openProc(t, r.db, eo)
	so := slack.Options{Name: "acme", Bot: "*", Mode: slack.ModeHTTP, BotToken: "xoxb-e2e", SigningSecret: slackSecret,
		APIURL: r.fake.APIURL(), Bots: r.team, Engine: r.eng, DMPolicy: cmp.Or(r.dmPolicy, core.DMOpen)}
	if r.socket {
		so.Mode, so.AppToken, so.SigningSecret = slack.ModeSocket, "xapp-e2e", ""
	}
	ad, err := slack.New(so)
	if err != nil {
		t.Fatal(err)
	}
	ads := []core.Adapter{ad}
	if r.more != nil {
		ads = append(ads, r.more(r.proc)...)
	}
	r.run(ads...)
}

// say posts a signed Events API message from user into the channel (a thread reply
// when threadTS is set) and requires a 200.
func (r *approvalRig) say(t *testing.T, user, ts, threadTS, text string) {
	t.Helper()
	ev := map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "channel": "C0TEST001",
		"channel_type": "channel", "team": slacktest.DefaultTeam, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	body, _ := json.Marshal(map[string]any{"token": "TESTverificationTOKEN000", "team_id": slacktest.DefaultTeam,
		"api_app_id": slacktest.DefaultAppID, "event": ev, "type": "event_callback", "event_id": "Ev" + strings.ReplaceAll(ts, ".", ""),
		"event_time": 1767225600})
	if r.socket {
		env, before := "env-"+ts, r.events.now().ingested
		if err := r.fake.PushEnvelope(r.ctx(), "events_api", env, body, 0); err != nil {
			t.Fatal(err)
		}
		// Acked first, ingested after: wait until the message is stored.
		r.events.wait(t, "the message to be stored", func(n counts) bool { return n.ingested > before })
		return
	}
	if code := slackPost(t, r.hook.URL+"/slack/acme/events", body); code != http.StatusOK {
		t.Fatalf("events POST = %d", code)
	}
}

// askToRun starts a thread asking the engineer to run the script and returns the
// question once its buttons are posted in the Slack thread.
func (r *approvalRig) askToRun(t *testing.T, user string) (core.Question, slacktest.Call) {
	t.Helper()
	r.say(t, user, slackRoot, "", "@engineer please run the script")
	r.idle()
	return r.question(t)
}

// question returns the only question and the chat.postMessage that showed it.
func (r *approvalRig) question(t *testing.T) (core.Question, slacktest.Call) {
	t.Helper()
	qs := storetest.Read(t, r.st, func(tx core.ReadTx) ([]core.Question, error) { return tx.Questions(false, 0) })
	if len(qs) != 1 {
		t.Fatalf("questions = %d, want 1", len(qs))
	}
	var shown []slacktest.Call
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if strings.Contains(c.Form.Get("blocks"), `"action_id":"`+slack.ActionPrefix) {
			shown = append(shown, c)
		}
	}
	if len(shown) != 1 {
		t.Fatalf("question posts with buttons = %d, want 1", len(shown))
	}
	q, p := qs[0], shown[0]
	var args struct{ Command string }
	if err := json.Unmarshal(q.Args, &args); err != nil || q.Kind != core.QuestionApproval || q.Tool != "shell" || args.Command != "echo x >> ran.txt" {
		t.Fatalf("question %+v (%v)", q, err)
	}
	if p.Form.Get("thread_ts") != slackRoot || p.Form.Get("channel") != "C0TEST001" {
		t.Errorf("question posted to %q / %q, want the thread", p.Form.Get("channel"), p.Form.Get("thread_ts"))
	}
	blocks := p.Form.Get("blocks")
	for i := range 2 {
		if !strings.Contains(blocks, fmt.Sprintf(`"value":"%s"`, slack.ButtonValue(q.Token, i))) {
			t.Errorf("button %d with value %s missing: %s", i, slack.ButtonValue(q.Token, i), blocks)
		}
	}
	if !strings.Contains(blocks, `echo x \u0026gt;\u0026gt; ran.txt`) {
		t.Errorf("the tool's arguments are not shown: %s", blocks)
	}
	if len(q.Posts) != 1 || q.Posts[0].PlatformID == "" {
		t.Errorf("question posts %+v, want the Slack ts recorded", q.Posts)
	}
	return q, p
}

// click presses button choice (0 Approve, 1 Reject) of q as user and requires a 200.
func (r *approvalRig) click(t *testing.T, user string, q core.Question, choice int) {
	t.Helper()
	c := slacktest.Click{User: user, UserName: slackUserNames[user], Channel: "C0TEST001", ThreadTS: slackRoot,
		ActionID: fmt.Sprintf("%s%d", slack.ActionPrefix, choice), Value: slack.ButtonValue(q.Token, choice)}
	if len(q.Posts) > 0 {
		c.MessageTS = q.Posts[0].PlatformID
	}
	req, err := slacktest.InteractiveRequest(context.Background(), r.hook.URL+"/slack/acme/interactive", slackSecret, c.Payload(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("interactive POST = %d", resp.StatusCode)
	}
}

// ran counts the lines the shell command wrote in every thread workspace.
func (r *approvalRig) ran(t *testing.T) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(r.work, "*", "ran.txt"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "x\n")
	}
	return n
}

// ephemerals returns the private notices sent to user, waiting (bounded) for n.
func (r *approvalRig) ephemerals(t *testing.T, user string, n int) []string {
	t.Helper()
	get := func() []string {
		var out []string
		for _, c := range r.fake.CallsTo("chat.postEphemeral") {
			if c.Form.Get("user") == user {
				out = append(out, c.Form.Get("text"))
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.fake.Wait(ctx, func(*slacktest.Server) bool { return len(get()) >= n })
	return get()
}

// requireDone checks the end of a decided run: the tool ran once if approved,
// never otherwise; the question answered by name, its run completed under the
// same id, the reply in the Slack thread and the buttons replaced by the
// decision.
func (r *approvalRig) requireDone(t *testing.T, asked core.Question, decision, reply string) {
	t.Helper()
	want := 0 // the tool ran once when approved, else never
	if strings.HasPrefix(decision, "Approved") {
		want = 1
	}
	if n := r.ran(t); n != want {
		t.Fatalf("the tool ran %d times, want %d", n, want)
	}
	var (
		q   core.Question
		run core.Run
	)
	if err := r.st.View(context.Background(), func(tx core.ReadTx) error {
		var err error
		if q, err = tx.Question(asked.ID); err != nil {
			return err
		}
		run, err = tx.Run(asked.Run)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if q.Decision() != decision {
		t.Errorf("decision %q, want %q", q.Decision(), decision)
	}
	if run.Status != core.RunCompleted {
		t.Errorf("run %d status %s, want completed under the same run id", run.ID, run.Status)
	}
	var replied bool
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if c.Form.Get("thread_ts") == slackRoot && strings.Contains(c.Form.Get("text"), reply) {
			replied = true
		}
	}
	if !replied {
		t.Errorf("no reply %q in the Slack thread", reply)
	}
	ups := r.fake.CallsTo("chat.update")
	if len(ups) == 0 {
		t.Fatal("the question's buttons were not replaced")
	}
	for _, u := range ups {
		if u.Form.Get("ts") != asked.Posts[0].PlatformID || u.Form.Get("channel") != "C0TEST001" {
			t.Errorf("chat.update of %q / %q, want the question post %q", u.Form.Get("channel"), u.Form.Get("ts"), asked.Posts[0].PlatformID)
		}
		if b := u.Form.Get("blocks"); strings.Contains(b, `"action_id"`) || !strings.Contains(b, decision) {
			t.Errorf("updated blocks %s, want no buttons and %q", b, decision)
		}
	}
}

func TestSlackApprovalApproveRunsToolOnce(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	q, _ := r.askToRun(t, slackAlice)
	if n := r.ran(t); n != 0 {
		t.Fatalf("the tool ran %d times before approval", n)
	}
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	r.requireDone(t, q, "Approved by Alice", "Done: the script ran.")
	if e := r.ephemerals(t, slackAlice, 0); len(e) != 0 {
		t.Errorf("the approver got notices %q", e)
	}
}

// TestSlackApprovalNonApproverRefused: with the bot's own approvers set, a person
// who posted in the thread but is not one of them is refused privately; nothing
// runs or changes until the approver approves.
func TestSlackApprovalNonApproverRefused(t *testing.T) {
	r := startApproval(t, []core.ActorID{slackActor(slackAlice)}, nil)
	q, _ := r.askToRun(t, slackBob)
	r.click(t, slackBob, q, core.ChoiceApprove)
	notes := r.ephemerals(t, slackBob, 1)
	if len(notes) != 1 || !strings.Contains(notes[0], "Only approvers of @engineer") {
		t.Fatalf("bob's notices %q", notes)
	}
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("a refused click ran the tool %d times", n)
	}
	if n := len(r.fake.CallsTo("chat.update")); n != 0 {
		t.Fatalf("a refused click changed the message (%d updates)", n)
	}
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	// Alice never posted, so her display name is not cached, and the HTTP path
	// makes no Web API call before answering Slack: the payload's username names her.
	r.requireDone(t, q, "Approved by alice", "Done: the script ran.")
}

func TestSlackApprovalSecondClickAlreadyDecided(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	q, _ := r.askToRun(t, slackAlice)
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	notes := r.ephemerals(t, slackAlice, 1)
	if len(notes) != 1 || !strings.Contains(notes[0], "Already decided: Approved by Alice") {
		t.Fatalf("second click notices %q", notes)
	}
	r.requireDone(t, q, "Approved by Alice", "Done: the script ran.")
}

// TestSlackApprovalTwoApproversAtOnce: two approvers click Approve concurrently;
// one wins, the other is told it was decided, and the tool runs once.
func TestSlackApprovalTwoApproversAtOnce(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice), slackActor(slackCarol)})
	q, _ := r.askToRun(t, slackAlice)
	var wg sync.WaitGroup
	for _, u := range []string{slackAlice, slackCarol} {
		wg.Go(func() { r.click(t, u, q, core.ChoiceApprove) })
	}
	wg.Wait()
	r.idle()
	if n := r.ran(t); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	var answered core.Question
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error { answered, _ = tx.Question(q.ID); return nil })
	winner, loser := slackAlice, slackCarol
	if answered.AnsweredBy == slackActor(slackCarol) {
		winner, loser = slackCarol, slackAlice
	}
	notes := r.ephemerals(t, loser, 1)
	if len(notes) != 1 || !strings.Contains(notes[0], "Already decided: "+answered.Decision()) {
		t.Fatalf("loser's notices %q (decision %q)", notes, answered.Decision())
	}
	if e := r.ephemerals(t, winner, 0); len(e) != 0 {
		t.Errorf("the winner got notices %q", e)
	}
	r.requireDone(t, q, answered.Decision(), "Done: the script ran.")
}

// TestSlackApprovalSurvivesRestart: the process stops between the question and the
// click; after a restart on the same store the click still works and the tool runs
// once.
func TestSlackApprovalSurvivesRestart(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	q, _ := r.askToRun(t, slackAlice)
	r.stop()
	r.start(t)
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("the tool ran %d times across the restart without approval", n)
	}
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	// The restarted adapter's name cache is empty: the payload's username is used.
	r.requireDone(t, q, "Approved by alice", "Done: the script ran.")
}

func TestSlackApprovalRejectTellsModel(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	q, _ := r.askToRun(t, slackAlice)
	r.click(t, slackAlice, q, core.ChoiceReject)
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("a rejected tool ran %d times", n)
	}
	reqs := engineerRequests(r.model)
	last := reqs[len(reqs)-1].Body.Messages
	if tm := last[len(last)-1]; tm.Role != "tool" || !strings.Contains(strings.ToLower(tm.Content), "rejected by") {
		t.Fatalf("the model's last message after Reject = %s %q, want the rejection", tm.Role, tm.Content)
	}
	r.requireDone(t, q, "Rejected by Alice", "Understood, I did not run it.")
}

// TestSlackApprovalParksOnlyThatThread: while the engineer waits for the approval,
// its new message in that thread waits (no model call), and a message for it in
// another Slack thread is answered; once approved the parked message is answered.
func TestSlackApprovalParksOnlyThatThread(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	q, _ := r.askToRun(t, slackAlice)
	if n := len(engineerRequests(r.model)); n != 1 {
		t.Fatalf("engineer model calls = %d, want 1", n)
	}
	r.say(t, slackAlice, "1767225700.000100", slackRoot, "@engineer are you there?")
	r.idle()
	if n := len(engineerRequests(r.model)); n != 1 {
		t.Fatalf("the parked thread's message reached the model (%d calls)", n)
	}
	const other = "1767225800.000100"
	r.say(t, slackBob, other, "", "@engineer status please")
	r.idle()
	if n := len(engineerRequests(r.model)); n != 2 {
		t.Fatalf("engineer model calls = %d, want 2 (the other thread answered)", n)
	}
	var answeredOther bool
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if c.Form.Get("thread_ts") == other && strings.Contains(c.Form.Get("text"), "nothing to run here") {
			answeredOther = true
		}
	}
	if !answeredOther {
		t.Fatal("the message in the other thread was not answered")
	}
	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	r.requireDone(t, q, "Approved by Alice", "Done: the script ran.")
	var inThread int
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if c.Form.Get("thread_ts") == slackRoot && strings.Contains(c.Form.Get("text"), "nothing to run here") {
			inThread++
		}
	}
	if inThread != 1 {
		t.Fatalf("the parked message was answered %d times after the approval, want 1", inThread)
	}
}

func engineerRequests(m *openaitest.Server) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range m.Requests() {
		if botOf(r) == "engineer" {
			out = append(out, r)
		}
	}
	return out
}

// allQuestions reads every question from the store, oldest first.
func (r *approvalRig) allQuestions(t *testing.T) []core.Question {
	t.Helper()
	return storetest.Read(t, r.st, func(tx core.ReadTx) ([]core.Question, error) { return tx.Questions(false, 0) })
}

// replied reports whether a chat.postMessage in the thread root contains text.
func (r *approvalRig) replied(root, text string) bool {
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if c.Form.Get("thread_ts") == root && strings.Contains(c.Form.Get("text"), text) {
			return true
		}
	}
	return false
}

// TestSlackAskHumanFreeTextReply: ask_human without choices is posted with no
// buttons and a hint; the next human reply in the thread answers it, the run
// resumes with the text, and the message shows who answered what.
func TestSlackAskHumanFreeTextReply(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	r.say(t, slackAlice, slackRoot, "", "@engineer which branch do you want me to build?")
	r.idle()
	qs := r.allQuestions(t)
	if len(qs) != 1 || qs[0].Kind != core.QuestionAsk || len(qs[0].Posts) != 1 {
		t.Fatalf("questions %+v", qs)
	}
	var shown *slacktest.Call
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if strings.Contains(c.Form.Get("blocks"), "Which branch should I build?") {
			shown = &c
		}
	}
	if shown == nil || shown.Form.Get("thread_ts") != slackRoot {
		t.Fatal("the question was not posted in the thread")
	}
	if b := shown.Form.Get("blocks"); strings.Contains(b, `"action_id"`) || !strings.Contains(b, "Reply in this thread") {
		t.Errorf("free-text question blocks %s, want no buttons and the reply hint", b)
	}
	r.say(t, slackAlice, "1767225700.000100", slackRoot, "release-2.4 please")
	r.idle()
	if !r.replied(slackRoot, "Going with the answer: ") || !r.replied(slackRoot, "release-2.4 please") {
		t.Fatalf("the run did not resume with the reply; posts %+v", r.fake.CallsTo("chat.postMessage"))
	}
	ups := r.fake.CallsTo("chat.update")
	if len(ups) != 1 || ups[0].Form.Get("ts") != qs[0].Posts[0].PlatformID || !strings.Contains(ups[0].Form.Get("blocks"), "Answered by Alice: release-2.4 please") {
		t.Fatalf("question message updates %+v", ups)
	}
}

// TestSlackAskHumanChoiceClicked: ask_human with choices shows one button per
// choice; the click on "prod" resumes the run with it.
func TestSlackAskHumanChoiceClicked(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)})
	r.say(t, slackAlice, slackRoot, "", "@engineer pick an environment and deploy")
	r.idle()
	qs := r.allQuestions(t)
	if len(qs) != 1 || len(qs[0].Choices) != 2 {
		t.Fatalf("questions %+v", qs)
	}
	q := qs[0]
	var blocks string
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if strings.Contains(c.Form.Get("blocks"), `"action_id"`) {
			blocks = c.Form.Get("blocks")
		}
	}
	for i, label := range []string{"staging", "prod"} {
		if !strings.Contains(blocks, `"text":"`+label+`"`) || !strings.Contains(blocks, `"value":"`+slack.ButtonValue(q.Token, i)+`"`) {
			t.Errorf("button %q missing in %s", label, blocks)
		}
	}
	r.click(t, slackAlice, q, 1)
	r.idle()
	if !r.replied(slackRoot, "Going with the answer: ") || !r.replied(slackRoot, "prod") {
		t.Fatalf("the run did not resume with the choice")
	}
	if ups := r.fake.CallsTo("chat.update"); len(ups) != 1 || !strings.Contains(ups[0].Form.Get("blocks"), "Answered by Alice: prod") {
		t.Fatalf("question message updates %+v", ups)
	}
}

// TestSlackApprovalExpires: nobody answers; after the approval timeout the
// question expires as a rejection, the message says so, the tool never runs and
// the run continues.
func TestSlackApprovalExpires(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)}, func(r *approvalRig) {
		r.expireAfter, r.expireEvery = 500*time.Millisecond, 50*time.Millisecond
	})
	q, _ := r.askToRun(t, slackAlice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.fake.WaitCalls(ctx, "chat.update", 1); err != nil {
		t.Fatalf("the question did not expire: %v", err)
	}
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("an expired approval ran the tool %d times", n)
	}
	r.requireDone(t, q, "Expired without an answer: rejected", "Understood, I did not run it.")
	r.click(t, slackAlice, q, core.ChoiceApprove)
	if notes := r.ephemerals(t, slackAlice, 1); len(notes) != 1 || !strings.Contains(notes[0], "Already decided: Expired") {
		t.Fatalf("a click after expiry: notices %q", notes)
	}
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("a click after expiry ran the tool %d times", n)
	}
}

// TestSlackApprovalOverSocketMode: the same app in Socket Mode: the question's
// clicks arrive as interactive envelopes, acked at once; a non-approver is refused
// privately, then the approver's click (named through users.info) runs the tool once.
func TestSlackApprovalOverSocketMode(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)}, func(r *approvalRig) { r.socket = true })
	q, _ := r.askToRun(t, slackAlice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	push := func(env, user string) {
		t.Helper()
		c := slacktest.Click{User: user, UserName: slackUserNames[user], Channel: "C0TEST001", ThreadTS: slackRoot,
			MessageTS: q.Posts[0].PlatformID, ActionID: slack.ActionPrefix + "0", Value: slack.ButtonValue(q.Token, 0)}
		if err := r.fake.PushClick(ctx, env, c); err != nil {
			t.Fatal(err)
		}
		if _, err := r.fake.WaitAck(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	push("env-bob", slackBob)
	if notes := r.ephemerals(t, slackBob, 1); len(notes) != 1 || !strings.Contains(notes[0], "Only approvers of @engineer") {
		t.Fatalf("bob's notices %q", notes)
	}
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("a refused click ran the tool %d times", n)
	}
	answered := r.events.now().answered
	push("env-alice", slackAlice)
	r.events.wait(t, "alice's answer", func(n counts) bool { return n.answered > answered })
	r.idle()
	r.requireDone(t, q, "Approved by Alice", "Done: the script ran.")
}
