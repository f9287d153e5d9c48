package e2e

import (
	"fmt"
	"strings"
	"testing"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

// tgGroupUpdate is a supergroup message from user with one leading entity.
func tgGroupUpdate(id, msg, user int64, text, entity string) []byte {
	return []byte(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},
"chat":{"id":-1001000000001,"title":"Eng","type":"supergroup"},"date":1767225660,"text":%q,"entities":[%s]}}`, id, msg, user, user, text, entity))
}

// TestTelegramStopInGroup: "/stop@bot" in a group by someone who did not ask
// for the work is refused with a plain reply and changes nothing; by the person
// who asked it cancels the engineer's run with a notice in the thread.
func TestTelegramStopInGroup(t *testing.T) {
	script, entered, release := blockEngineer()
	agent := &scripted{fn: script, calls: map[string][]*core.Job{}}
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddBot(telegramtest.Bot{Token: "tok-team", ID: 900, Username: "team_bot"})
	r := startTelegramWith(t, fake, "", core.Options{Agent: agent}, nil, telegram.Options{Name: "team", Bot: "*", Token: "tok-team"})
	st := r.st
	defer close(release)

	if _, err := fake.PushUpdate("tok-team", tgGroupUpdate(1, 301, 100000001, "@team_bot @engineer long job", `{"offset":0,"length":9,"type":"mention"}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	if _, err := fake.PushUpdate("tok-team", tgGroupUpdate(2, 302, 100000002, "/stop@team_bot", `{"offset":0,"length":14,"type":"bot_command"}`)); err != nil {
		t.Fatal(err)
	}
	refusal := r.sent("only an approver")
	if !strings.Contains(refusal.Params["reply_parameters"]+refusal.Params["reply_to_message_id"], "302") {
		t.Errorf("refusal is not a reply to the command: %v", refusal.Params)
	}
	if got := runStatuses(t, st); len(got) != 1 || got[0] != core.RunRunning {
		t.Fatalf("after a refused stop runs = %v", got)
	}
	if _, err := fake.PushUpdate("tok-team", tgGroupUpdate(3, 303, 100000001, "/stop@team_bot", `{"offset":0,"length":14,"type":"bot_command"}`)); err != nil {
		t.Fatal(err)
	}
	r.sent("Stopped the work of @engineer")
	r.sent("@engineer's work here was stopped by U100000001")
	if got := runStatuses(t, st); len(got) != 1 || got[0] != core.RunCancelled {
		t.Fatalf("after /stop runs = %v", got)
	}
	if n := len(agent.runs("chief_of_staff")); n != 0 {
		t.Errorf("/stop woke the default bot %d times", n)
	}
}
