package core_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"openbot/core"
)

// openerAdapter is recAdapter with threads under top-level messages, as on
// Slack: "<conv>" opens "<conv>/<root>".
type openerAdapter struct{ *recAdapter }

func (o openerAdapter) OpenThread(conv core.ConversationRef, root string) (core.ConversationRef, string, bool) {
	if strings.Contains(string(conv), "/") {
		return "", "", false
	}
	return core.ConversationRef(string(conv) + "/" + root), "console:" + string(conv) + "/" + root, true
}

// announce ingests an event from outside the conversation "ops", as a trigger does.
func (h *harness) announce(key, text string, mod ...func(*core.Inbound)) core.IngestResult {
	h.t.Helper()
	return h.say(text, append([]func(*core.Inbound){func(in *core.Inbound) {
		in.DedupKey, in.ThreadKey, in.Conversation, in.PlatformID = "hook:"+key+":"+text, "hook:"+key, "ops", ""
		in.SenderID, in.SenderName = "trigger:github", "github"
		in.Announce, in.Mentions, in.DefaultBot = true, []string{"engineer"}, "engineer"
	}}, mod...)...)
}

// TestAnnouncedEventOpensAPlatformThread: an event posted into a conversation
// from outside is delivered there as the first message, the thread moves into
// the platform thread under it (the bot's reply goes there), a later event with
// the same key joins that thread, a redelivery changes nothing, and an event
// that wakes nobody is stored and posted without a run.
func TestAnnouncedEventOpensAPlatformThread(t *testing.T) {
	h := newHarness(t, core.Limits{})
	ad := openerAdapter{h.ad}
	h.start2(ad)
	first := h.announce("pr1", "PR opened")
	if len(first.Woken) != 1 || first.Woken[0] != "engineer" {
		t.Fatalf("woken %v, want engineer", first.Woken)
	}
	h.idle()
	ds := h.ad.deliveries()
	if len(ds) != 2 {
		t.Fatalf("deliveries %v, want the event and the reply", h.ad.texts())
	}
	if ds[0].Conversation != "ops" || ds[0].Text != "PR opened" || ds[0].Sender.Name != "github" {
		t.Errorf("first delivery %+v, want the event at the top level of ops", ds[0])
	}
	root := "p1"
	if ds[1].Conversation != core.ConversationRef("ops/"+root) || ds[1].Sender.Handle != "engineer" {
		t.Errorf("reply went to %q from %q, want ops/%s from engineer", ds[1].Conversation, ds[1].Sender.Handle, root)
	}
	// A person's reply in the platform thread joins the thread.
	id, err := h.eng.ThreadByKey(context.Background(), "console:ops/"+root)
	if err != nil || id != first.Thread {
		t.Errorf("platform thread key bound to %d (%v), want %d", id, err, first.Thread)
	}

	second := h.announce("pr1", "PR synchronized")
	if second.Thread != first.Thread || len(second.Woken) != 1 {
		t.Fatalf("second event: thread %d woken %v, want thread %d, engineer", second.Thread, second.Woken, first.Thread)
	}
	h.idle()
	for _, d := range h.ad.deliveries()[2:] {
		if d.Conversation != core.ConversationRef("ops/"+root) {
			t.Errorf("later delivery %q went to %q, want the platform thread", d.Text, d.Conversation)
		}
	}
	if again := h.announce("pr1", "PR synchronized"); !again.Duplicate || len(again.Woken) != 0 {
		t.Errorf("redelivery: %+v, want a duplicate waking nobody", again)
	}
	quiet := h.announce("pr1", "PR closed", func(in *core.Inbound) { in.WakeNobody = true })
	if len(quiet.Woken) != 0 {
		t.Errorf("WakeNobody woke %v", quiet.Woken)
	}
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 2 {
		t.Errorf("%d runs, want 2 (the event waking nobody starts none)", n)
	}
	if got := h.ad.texts(); got[len(got)-1] != "[github] PR closed" {
		t.Errorf("last delivery %q, want the quiet event posted", got[len(got)-1])
	}
	var th core.Thread
	h.store.View(context.Background(), func(tx core.ReadTx) error { th, _ = tx.Thread(first.Thread); return nil })
	if len(th.Bindings) != 1 || th.Bindings[0].Conversation != core.ConversationRef("ops/"+root) {
		t.Errorf("bindings %+v, want only the platform thread", th.Bindings)
	}
}

// TestInlineAttachmentIsSaved: content that came with a message (a webhook's
// payload) is written into the thread's workspace like a downloaded file and
// dropped from the stored message.
func TestInlineAttachmentIsSaved(t *testing.T) {
	h := newHarness(t, core.Limits{})
	ws := t.TempDir()
	h.opts = func(o *core.Options) {
		o.Files.Dir = func(id core.ThreadID) string { return filepath.Join(ws, strconv.Itoa(int(id))) }
	}
	h.start2(openerAdapter{h.ad})
	payload := []byte(`{"action":"opened"}`)
	res := h.announce("pr2", "PR opened", func(in *core.Inbound) {
		in.Attachments = []core.Attachment{{Name: "payload.json", Type: "application/json", Kind: "document", Size: int64(len(payload)), Data: payload}}
	})
	h.idle()
	ms := h.messages(res.Thread)
	a := ms[0].Attachments[0]
	if a.Path == "" || a.Data != nil || a.Error != "" {
		t.Fatalf("attachment %+v, want saved with its content dropped", a)
	}
	got, err := os.ReadFile(filepath.Join(ws, strconv.Itoa(int(res.Thread)), a.Path))
	if err != nil || string(got) != string(payload) {
		t.Errorf("saved %q (%v), want the payload", got, err)
	}
	if !strings.Contains(ms[0].Text, "saved at "+a.Path) {
		t.Errorf("message text %q does not name the saved file", ms[0].Text)
	}
	if jobs := h.agent.jobsFor("engineer"); len(jobs) != 1 {
		t.Errorf("%d runs, want 1 after the file was saved", len(jobs))
	}
}

// TestPersonAnsweringAnEventIsAnswered: a trigger is not a person, so one
// person writing in a thread a trigger opened, addressing nobody, is answered
// (the quiet threads rule counts people only).
func TestPersonAnsweringAnEventIsAnswered(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start2(openerAdapter{h.ad})
	first := h.announce("pr3", "PR opened")
	h.idle()
	res := h.say("what changed?", func(in *core.Inbound) { in.Thread = first.Thread; in.ThreadKey = "" })
	if len(res.Woken) != 1 || res.Woken[0] != "engineer" {
		t.Errorf("a person's unaddressed message woke %v, want engineer", res.Woken)
	}
}
