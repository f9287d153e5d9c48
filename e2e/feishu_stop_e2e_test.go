package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// TestFeishuStopInTopic: "@Bot /stop" in a group topic by someone who did not
// ask for the work is refused with a plain reply and changes nothing; by the
// person who asked it cancels the engineer's run with a notice in the topic.
func TestFeishuStopInTopic(t *testing.T) {
	script, entered, release := blockEngineer()
	agent := &scripted{fn: script, calls: map[string][]*core.Job{}}
	fake := feishutest.New(t)
	p := startFsProc(t, fake, filepath.Join(t.TempDir(), "openbot.db"), agent)
	defer close(release)
	at := []feishutest.Mention{feishutest.BotMention("@_user_1")}
	p.post(feishutest.MessageEvent{MessageID: "om_stop_root", Text: "@_user_1 long job", Mentions: at})
	<-entered
	p.post(feishutest.MessageEvent{MessageID: "om_stop_bob", RootID: "om_stop_root", ParentID: "om_stop_root",
		Sender: feishutest.BobOpenID, Text: "@_user_1 /stop", Mentions: at})
	if r := p.replyTo("om_stop_bob"); !strings.Contains(r.Text(), "only an approver") {
		t.Fatalf("reply to Bob = %q", r.Text())
	}
	if got := runStatuses(t, p.st); len(got) != 1 || got[0] != core.RunRunning {
		t.Fatalf("after a refused stop runs = %v", got)
	}
	p.post(feishutest.MessageEvent{MessageID: "om_stop_alice", RootID: "om_stop_root", ParentID: "om_stop_root",
		Text: "@_user_1 /stop", Mentions: at})
	if r := p.replyTo("om_stop_alice"); !strings.Contains(r.Text(), "Stopped the work of @engineer") {
		t.Fatalf("reply to Alice = %q", r.Text())
	}
	p.sent("@engineer's work here was stopped by")
	if got := runStatuses(t, p.st); len(got) != 1 || got[0] != core.RunCancelled {
		t.Fatalf("after /stop runs = %v", got)
	}
}
