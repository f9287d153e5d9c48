package e2e

// End-to-end tests of people and policy on Slack: pairing of an unknown DM and
// the asker who may not approve their own shell call, through the real engine,
// agent loop, bbolt store and Slack adapter against the fake Slack and model.

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/core"
	"openbot/internal/runtest"
)

var pairCode = regexp.MustCompile(`/pair ([A-Z0-9]{8}) `)

// slackPeopleRig is the approval rig with the shipped rules: no self_approve,
// the given owners, and dm_policy pairing.
func slackPeopleRig(t *testing.T, owners, approvers []core.ActorID) *approvalRig {
	return startApproval(t, nil, approvers, func(r *approvalRig) {
		r.dmPolicy = core.DMPairing
		r.policy = func(o *core.Options) { o.Owners, o.SelfApprove = owners, false }
	})
}

// dm posts user's direct message text in channel and requires a 200.
func (r *approvalRig) dm(t *testing.T, user, channel, ts, text string) {
	t.Helper()
	if code := slackPost(t, r.hook.URL+"/slack/acme/events", slackEvent(t, "message", channel, "im", user, ts, "", text)); code != 200 {
		t.Fatalf("events POST = %d", code)
	}
}

// postedTo waits (bounded) until n messages were posted to channel and returns
// their texts.
func (r *approvalRig) postedTo(t *testing.T, channel string, n int) []string {
	t.Helper()
	get := func() []string {
		var out []string
		for _, c := range r.fake.CallsTo("chat.postMessage") {
			if c.Form.Get("channel") == channel {
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

// TestSlackPairing: an unknown person's DM gets a pairing code and no run; their
// own /pair, an owner's wrong code and a reused code are refused and change
// nothing; an owner's /pair lets their next message run.
func TestSlackPairing(t *testing.T) {
	r := slackPeopleRig(t, []core.ActorID{slackActor(slackAlice)}, nil)
	const carolDM, aliceDM = "D0CAROL01", "D0ALICE01"
	r.dm(t, slackCarol, carolDM, "1767225700.000100", "hello there")
	r.idle()
	got := r.postedTo(t, carolDM, 1)
	m := pairCode.FindStringSubmatch(strings.Join(got, "\n"))
	if len(got) != 1 || m == nil {
		t.Fatalf("carol got %q, want one message with a pairing code", got)
	}
	// The /new slash command with a text is no way around pairing either.
	req, err := slacktest.CommandRequest(context.Background(), r.hook.URL+"/slack/acme/commands", slackSecret,
		slacktest.Command{Channel: carolDM, User: slackCarol, UserName: "carol", Command: "/new", Text: "hello by command"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := runtest.Do(t, req); !strings.Contains(body, "/pair "+m[1]) {
		t.Fatalf("/new from an unknown person answered %d %s, want the pairing code", code, body)
	}
	r.idle()
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("an unknown DM made %d model requests", n)
	}
	code := m[1]
	steps := []struct {
		user, channel, text, want string
	}{
		{slackCarol, carolDM, "/pair " + code, "only an owner"},
		{slackAlice, aliceDM, "/pair ZZZZ9999", "not valid"},
		{slackAlice, aliceDM, "pair " + strings.ToLower(code), "Let in Carol"},
		{slackAlice, aliceDM, "/pair " + code, "not valid"},
	}
	counts := map[string]int{carolDM: 1}
	for i, s := range steps {
		r.dm(t, s.user, s.channel, "1767225710.00010"+string(rune('0'+i)), s.text)
		counts[s.channel]++
		texts := r.postedTo(t, s.channel, counts[s.channel])
		if last := texts[len(texts)-1]; !strings.Contains(last, s.want) {
			t.Fatalf("%s %q: answered %q, want %q", s.user, s.text, last, s.want)
		}
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("commands made %d model requests", n)
	}
	r.dm(t, slackCarol, carolDM, "1767225720.000100", "hello again")
	r.idle()
	texts := r.postedTo(t, carolDM, 3)
	if len(texts) != 3 || !strings.Contains(texts[2], "here") {
		t.Fatalf("carol's DM after pairing: %q, want a bot's reply", texts)
	}
}

// TestSlackAskerCannotApproveOwnShell: Alice, an approver, asks for the shell;
// her own click is refused privately and nothing runs; Bob's click (the other
// approver) runs it once.
func TestSlackAskerCannotApproveOwnShell(t *testing.T) {
	r := slackPeopleRig(t, nil, []core.ActorID{slackActor(slackAlice), slackActor(slackBob)})
	q, _ := r.askToRun(t, slackAlice)
	r.click(t, slackAlice, q, core.ChoiceApprove)
	if notes := r.ephemerals(t, slackAlice, 1); len(notes) != 1 || strings.Contains(notes[0], ".md") {
		t.Fatalf("alice's notices %q, want one refusal", notes)
	}
	r.idle()
	if n := r.ran(t); n != 0 {
		t.Fatalf("the asker's own click ran the tool %d times", n)
	}
	r.click(t, slackBob, q, core.ChoiceApprove)
	r.idle()
	r.requireDone(t, q, "Approved by bob", "Done: the script ran.") // bob never posted: the payload's username names him
}

// TestSlackNoApproverRefusesWithNotice: with nobody but the asker who could
// approve, no buttons are posted, the tool does not run, and the Slack thread
// says how to add an approver.
func TestSlackNoApproverRefusesWithNotice(t *testing.T) {
	r := slackPeopleRig(t, nil, nil)
	r.say(t, slackAlice, slackRoot, "", "@engineer please run the script")
	r.idle()
	if qs := r.allQuestions(t); len(qs) != 1 || qs[0].Status != core.QuestionAnswered || qs[0].Approved() || len(qs[0].Posts) != 0 {
		t.Fatalf("questions %+v, want one refused at once and never posted", qs)
	}
	if n := r.ran(t); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	var notice bool
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		text := c.Form.Get("text")
		if c.Form.Get("blocks") != "" && strings.Contains(c.Form.Get("blocks"), "Approve") {
			t.Fatalf("approval buttons were posted: %s", c.Form.Get("blocks"))
		}
		if c.Form.Get("thread_ts") == slackRoot && strings.Contains(text, "owner add") && !strings.Contains(text, ".md") {
			notice = true
		}
	}
	if !notice {
		t.Fatal("no notice in the thread saying how to add an approver")
	}
}

// post posts user's message in channel (a thread reply when threadTS is set)
// and requires a 200.
func (r *approvalRig) post(t *testing.T, channel, user, ts, threadTS, text string) {
	t.Helper()
	if code := slackPost(t, r.hook.URL+"/slack/acme/events", slackEvent(t, "message", channel, "channel", user, ts, threadTS, text)); code != 200 {
		t.Fatalf("events POST = %d", code)
	}
}

// TestSlackChannelPolicy: /policy from a non-owner is refused privately and
// changes nothing; an owner's /policy makes C0TEST001 members: listed and takes
// shell away in C0TEST002. There, a non-member's two mentions get one private
// notice and no run; a listed person's runs; and the engineer is offered shell
// in C0TEST001 but not in C0TEST002.
func TestSlackChannelPolicy(t *testing.T) {
	r := slackPeopleRig(t, []core.ActorID{slackActor(slackAlice)}, []core.ActorID{slackActor(slackAlice)})
	self := "<@" + slacktest.DefaultBotUser + "> "
	r.post(t, "C0TEST001", slackCarol, "1767225800.000100", "", self+"/policy members=listed")
	if notes := r.ephemerals(t, slackCarol, 1); len(notes) != 1 || !strings.Contains(notes[0], "only an owner") {
		t.Fatalf("carol's /policy: %q", notes)
	}
	r.post(t, "C0TEST001", slackAlice, "1767225801.000100", "", self+"/policy members=listed listed="+string(slackActor(slackBob)))
	r.post(t, "C0TEST002", slackAlice, "1767225802.000100", "", self+"/policy tools_removed=shell")
	if notes := r.ephemerals(t, slackAlice, 2); len(notes) != 2 || !strings.Contains(notes[0], "members=listed") || !strings.Contains(notes[1], "tools_removed=shell") {
		t.Fatalf("alice's /policy answers: %q", notes)
	}
	r.post(t, "C0TEST001", slackCarol, "1767225803.000100", "", "@engineer hello")
	r.post(t, "C0TEST001", slackCarol, "1767225804.000100", "", "@engineer hello again")
	r.idle()
	if notes := r.ephemerals(t, slackCarol, 2); len(notes) != 2 || !strings.Contains(notes[1], "only the people an owner has let in") {
		t.Fatalf("carol's notices %q, want the /policy refusal and one notice", notes)
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("a non-member's messages made %d model requests", n)
	}
	r.post(t, "C0TEST001", slackBob, "1767225805.000100", "", "@engineer hello from bob")
	r.idle()
	r.post(t, "C0TEST002", slackCarol, "1767225806.000100", "", "@engineer hello in two")
	r.idle()
	offered := map[string][]string{}
	for _, req := range engineerRequests(r.model) {
		u := lastUser(req)
		offered[u] = req.ToolNames()
	}
	var one, two []string
	for u, tools := range offered {
		switch {
		case strings.Contains(u, "hello from bob"):
			one = tools
		case strings.Contains(u, "hello in two"):
			two = tools
		}
	}
	if !slices.Contains(one, "shell") || slices.Contains(two, "shell") || two == nil {
		t.Fatalf("tools offered in C0TEST001 %v and C0TEST002 %v, want shell only in the first", one, two)
	}
}
