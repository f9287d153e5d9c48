package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

// TestTelegramReplyToNoteOrQuestionJoinsItsThread: in a private chat, after /new
// has moved the chat on, a reply to the bot's post_message note or to its
// question (the inline-keyboard message) of the older dialog joins that dialog's
// thread, as a reply to its answer does (DESIGN.md §3 reply chains).
func TestTelegramReplyToNoteOrQuestionJoinsItsThread(t *testing.T) {
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddBot(telegramtest.Bot{Token: "tok-engineer", ID: 900, Username: "engineer_bot"})
	agent := &noteAgent{}
	p := startTgProc(t, fake, filepath.Join(t.TempDir(), "openbot.db"), agent, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const user = 7
	var update int64
	push := func(msg int64, text string, replyTo int64) {
		t.Helper()
		update++
		body := privateUpdate(update, msg, user, text)
		if replyTo != 0 {
			body = []byte(strings.Replace(string(body), `,"text":`, fmt.Sprintf(`,"reply_to_message":{"message_id":%d,"from":{"id":900,"is_bot":true,"first_name":"Engineer","username":"engineer_bot"},"chat":{"id":%d,"type":"private"},"date":1767225600,"text":"x"},"text":`, replyTo, user), 1))
		}
		if strings.HasPrefix(text, "/") {
			body = []byte(strings.Replace(string(body), `,"text":`, fmt.Sprintf(`,"entities":[{"offset":0,"length":%d,"type":"bot_command"}],"text":`, len(text)), 1))
		}
		p.deliver("tok-engineer", body)
	}
	// sentID is the message_id of the delivered note (a message whose text has
	// substr) or, with substr "", of the delivered question.
	sentID := func(substr string) int64 {
		t.Helper()
		var id int64
		_ = p.st.View(ctx, func(tx core.ReadTx) error {
			for i := core.OutboxID(1); i < 100; i++ {
				o, err := tx.Outbox(i)
				if err != nil {
					continue
				}
				match := substr == "" && o.Op == core.OpQuestion
				if o.Op == core.OpMessage {
					m, err := tx.Message(o.Message)
					match = err == nil && substr != "" && strings.Contains(m.Text, substr)
				}
				if match && o.PlatformID != "" {
					id, _ = strconv.ParseInt(o.PlatformID, 10, 64)
				}
			}
			return nil
		})
		if id == 0 {
			t.Fatalf("no delivered message for %q", substr)
		}
		return id
	}

	push(11, "first task, with a note please", 0)
	note := sentID("progress note for")
	push(12, "second task, ask me", 0)
	question := sentID("")
	push(13, "/new", 0)
	push(14, "third task", 0)
	first, third := p.threadOf("first task"), p.threadOf("third task")
	if p.threadOf("second task") != first || third == first {
		t.Fatalf("threads: first %d, second %d, third %d", first, p.threadOf("second task"), third)
	}
	push(15, "about your note", note)
	push(16, "staging", question)
	for _, text := range []string{"about your note", "staging"} {
		if got := p.threadOf(text); got != first {
			t.Errorf("reply %q went to thread %d, want %d (current dialog %d)", text, got, first, third)
		}
	}
}

// TestTelegramNewSurvivesRestart: a bare /new in a private chat is confirmed
// without a model call; the process restarts (store reopened, new engine and
// adapter) before the next message, which still starts a new thread.
func TestTelegramNewSurvivesRestart(t *testing.T) {
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddBot(telegramtest.Bot{Token: "tok-engineer", ID: 900, Username: "engineer_bot"})
	db := filepath.Join(t.TempDir(), "openbot.db")
	agent := &noteAgent{}
	p := startTgProc(t, fake, db, agent, nil)
	var update int64
	push := func(msg int64, text string) {
		t.Helper()
		update++
		body := privateUpdate(update, msg, 7, text)
		if strings.HasPrefix(text, "/") {
			body = []byte(strings.Replace(string(body), `,"text":`, fmt.Sprintf(`,"entities":[{"offset":0,"length":%d,"type":"bot_command"}],"text":`, len(text)), 1))
		}
		p.deliver("tok-engineer", body)
	}
	push(11, "old dialog")
	runs := agent.count()
	push(12, "/new")
	if got := agent.count(); got != runs {
		t.Errorf("/new made %d model runs, want none", got-runs)
	}
	var confirmed bool
	for _, c := range fake.Calls("sendMessage") {
		confirmed = confirmed || (telegramtest.ParseReplyTo(c) == 12 && strings.Contains(c.Params["text"], "new conversation"))
	}
	if !confirmed {
		t.Error("/new was not confirmed")
	}
	p.stop()

	p = startTgProc(t, fake, db, agent, nil)
	defer p.stop()
	push(13, "fresh dialog")
	if a, b := p.threadOf("old dialog"), p.threadOf("fresh dialog"); a == 0 || a == b {
		t.Errorf("threads: old %d, fresh %d; want the message after /new and a restart in a new thread", a, b)
	}
}
