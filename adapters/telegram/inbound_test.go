package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

func TestPrivateMessageBecomesInbound(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	run(t, a)
	id := e.push(t, readFixture(t, "updates/01_private_text.json"))
	got := e.eng.ins.Wait(t, 1)[0]
	want := core.Inbound{
		Account:      "telegram/main",
		Platform:     "telegram",
		DedupKey:     "telegram:7000000001:100000001:10",
		ThreadKey:    "telegram:7000000001:100000001",
		Conversation: "100000001",
		PlatformID:   "10",
		SenderID:     "telegram:100000001",
		SenderName:   "Alice Example",
		Text:         "Hello! Can you summarise yesterday's incidents?",
		StartThread:  true,
		DefaultBot:   "engineer",
		Received:     time.Unix(1767225600, 0).UTC(),
	}
	if !equalInbound(got, want) {
		t.Errorf("inbound\n got %+v\nwant %+v", got, want)
	}
	e.waitConfirmed(t, id+1)
	// Typing follows core's Working calls, not ingestion.
	if c := e.srv.Calls("sendChatAction"); len(c) != 0 {
		t.Errorf("sendChatAction on ingest: %v", c[0].Params)
	}
	// The offset is saved before the getUpdates that confirmed it.
	if got := e.cursors.get("telegram/main/offset"); got != "500000002" {
		t.Fatalf("offset cursor = %q, want 500000002", got)
	}
}

func equalInbound(a, b core.Inbound) bool {
	return a.Account == b.Account && a.Platform == b.Platform && a.DedupKey == b.DedupKey &&
		a.ThreadKey == b.ThreadKey && a.Conversation == b.Conversation && a.PlatformID == b.PlatformID &&
		a.SenderID == b.SenderID && a.SenderName == b.SenderName && a.Text == b.Text &&
		slices.Equal(a.Mentions, b.Mentions) && a.StartThread == b.StartThread && a.NewThread == b.NewThread &&
		a.DefaultBot == b.DefaultBot && a.Received.Equal(b.Received)
}

// TestFixtureUpdates polls the ten fixture updates in one getUpdates answer and
// checks which of them became Inbounds, with what keys, mentions and text.
func TestFixtureUpdates(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	var all struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(readFixture(t, "getUpdates_response.json"), &all); err != nil {
		t.Fatal(err)
	}
	for _, u := range all.Result {
		e.push(t, u)
	}
	run(t, a)
	e.waitConfirmed(t, 500000011)
	type row struct {
		dedup, thread, conv, text string
		mentions                  []string
		newThread                 bool
	}
	want := []row{
		{"telegram:7000000001:100000001:10", "telegram:7000000001:100000001", "100000001", "Hello! Can you summarise yesterday's incidents?", nil, false},
		{"telegram:-1001000000001:201", "telegram:-1001000000001", "-1001000000001", "👋 @engineer please loop in Bob on the release checklist", []string{"engineer"}, false},
		{"telegram:-1001000000001:203", "telegram:-1001000000001", "-1001000000001", "/ask what is blocking the deploy?", []string{"engineer"}, false},
		{"telegram:-1001000000001:204", "telegram:-1001000000001", "-1001000000001", "which test exactly?", []string{"engineer"}, false},
		{"telegram:-1001000000002:43", "telegram:-1001000000002:topic:42", "-1001000000002:topic:42", "@engineer draft the release notes for 2.4", []string{"engineer"}, false},
		// 06 (plain message in a topic the bot created) is not a reply to the bot; 07 is.
		{"telegram:-1001000000002:45", "telegram:-1001000000002:topic:42", "-1001000000002:topic:42", "yes please", []string{"engineer"}, false},
		// 08 callback query and 09 edited message start nothing; 10 /start is
		// answered with the welcome and the team, without a run.
	}
	got := e.eng.ins.All()
	if len(got) != len(want) {
		t.Fatalf("got %d inbounds, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		r := row{g.DedupKey, g.ThreadKey, string(g.Conversation), g.Text, g.Mentions, g.NewThread}
		if r.dedup != w.dedup || r.thread != w.thread || r.conv != w.conv || r.text != w.text || !slices.Equal(r.mentions, w.mentions) || r.newThread != w.newThread {
			t.Errorf("inbound %d\n got %+v\nwant %+v", i, r, w)
		}
	}
	// The callback query was answered so the client's spinner stops.
	calls := e.waitCalls(t, "answerCallbackQuery", 1)
	if calls[0].Params["callback_query_id"] != "4300000000000000001" {
		t.Errorf("answerCallbackQuery params = %v", calls[0].Params)
	}
}

// TestWhatStartsARun covers what starts a run in a group (DESIGN.md §3).
func TestWhatStartsARun(t *testing.T) {
	replyToBot := func(id int64) []byte {
		var u map[string]map[string]any
		_ = json.Unmarshal(groupMsg(id, "which test?"), &u)
		u["message"]["reply_to_message"] = map[string]any{
			"message_id": 202, "date": 1,
			"from": map[string]any{"id": botID, "is_bot": true, "first_name": "Bridge Bot", "username": botUsername},
			"chat": map[string]any{"id": groupChat, "type": "supergroup"},
		}
		b, _ := json.Marshal(u)
		return b
	}
	textMention := ent("text_mention", 0, 6)
	textMention["user"] = map[string]any{"id": botID, "is_bot": true, "first_name": "Bridge"}
	tests := []struct {
		name      string
		update    []byte
		run       bool
		text      string
		newThread bool
	}{
		{"no mention", groupMsg(1, "just chatting"), false, "", false},
		{"mention", groupMsg(2, "@test_bridge_bot hi", ent("mention", 0, 16)), true, "@engineer hi", false},
		{"mention any case", groupMsg(3, "hi @Test_Bridge_Bot", ent("mention", 3, 16)), true, "hi @engineer", false},
		{"longer name", groupMsg(4, "@test_bridge_bot_two hi", ent("mention", 0, 20)), false, "", false},
		{"other bot", groupMsg(5, "@someone_else hi", ent("mention", 0, 13)), false, "", false},
		{"text mention", groupMsg(6, "Bridge, hi", textMention), true, "@engineer, hi", false},
		{"reply to bot", replyToBot(7), true, "which test?", false},
		// A bare /new starts nothing itself: it is confirmed and the next message
		// begins the new thread (TestBareNewThenMessage).
		{"new for this bot", groupMsg(8, "/new@test_bridge_bot", ent("bot_command", 0, 20)), false, "", false},
		{"new with text", groupMsg(9, "/new@test_bridge_bot plan 2.5", ent("bot_command", 0, 20)), true, "plan 2.5", true},
		{"new for other bot", groupMsg(10, "/new@other_bot", ent("bot_command", 0, 14)), false, "", false},
		{"bare command in group", groupMsg(11, "/new", ent("bot_command", 0, 4)), false, "", false},
		{"mention in text only", groupMsg(12, "@test_bridge_bot hi"), false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.adapter(t, e.options())
			a.me = testSelf()
			var u update
			if err := json.Unmarshal(tt.update, &u); err != nil {
				t.Fatal(err)
			}
			if err := a.handleUpdate(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			got := e.eng.ins.All()
			if !tt.run {
				if len(got) != 0 {
					t.Errorf("ingested %+v; want nothing", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d inbounds, want 1", len(got))
			}
			if got[0].Text != tt.text || got[0].NewThread != tt.newThread || !slices.Equal(got[0].Mentions, []string{"engineer"}) {
				t.Errorf("inbound text %q new %v mentions %v; want %q %v [engineer]", got[0].Text, got[0].NewThread, got[0].Mentions, tt.text, tt.newThread)
			}
			if got[0].ThreadKey != "telegram:-1001000000001" || got[0].DedupKey == "" {
				t.Errorf("keys %q %q", got[0].ThreadKey, got[0].DedupKey)
			}
		})
	}
}

func testSelf() *tgUser {
	return &tgUser{ID: botID, IsBot: true, FirstName: "Bridge Bot", UserName: botUsername}
}

func TestWholeTeamAccountMention(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.Bot = "*"
	a := e.adapter(t, opts)
	a.me = testSelf()
	var u update
	_ = json.Unmarshal(groupMsg(2, "hey @test_bridge_bot check this\nsecond line", ent("mention", 4, 16)), &u)
	if err := a.handleUpdate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	got := e.eng.ins.All()
	if len(got) != 1 || !slices.Equal(got[0].Mentions, []string{"*"}) || got[0].Text != "hey check this\nsecond line" || got[0].DefaultBot != "" {
		t.Errorf("got %+v; want Mentions [*], the mention removed, no DefaultBot", got)
	}
}

func TestDMFromUnknownUserIsRefused(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.AllowUsers = []string{"999"}
	a := e.adapter(t, opts)
	run(t, a)
	id := e.push(t, readFixture(t, "updates/01_private_text.json"))
	e.waitConfirmed(t, id+1)
	calls := e.srv.Calls("sendMessage")
	if len(calls) != 1 {
		t.Fatalf("%d sendMessage calls, want one refusal", len(calls))
	}
	if c := calls[0]; c.Params["chat_id"] != "100000001" || !strings.Contains(c.Params["text"], "100000001") {
		t.Errorf("refusal %v; want it in chat 100000001 carrying the user id", c.Params)
	}
	if got := e.eng.ins.All(); len(got) != 0 {
		t.Errorf("ingested %+v; want nothing", got)
	}
}

func TestDMPolicyOpenAndNumericAllow(t *testing.T) {
	for _, opts := range []func(*Options){
		func(o *Options) { o.AllowUsers, o.DMPolicy = nil, DMOpen },
		func(o *Options) { o.AllowUsers = []string{"100000001"} },
	} {
		e := newEnv(t)
		o := e.options()
		opts(&o)
		a := e.adapter(t, o)
		a.me = testSelf()
		var u update
		_ = json.Unmarshal(readFixture(t, "updates/01_private_text.json"), &u)
		if err := a.handleUpdate(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		if n := len(e.eng.ins.All()); n != 1 {
			t.Errorf("%+v: %d inbounds, want 1", o.AllowUsers, n)
		}
	}
}

func TestHelpListsTheTeam(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	a.me = testSelf()
	var u update
	_ = json.Unmarshal([]byte(`{"update_id":1,"message":{"message_id":12,"date":1,"text":"/help","entities":[{"type":"bot_command","offset":0,"length":5}],
		"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"}}}`), &u)
	if err := a.handleUpdate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	calls := e.srv.Calls("sendMessage")
	if len(calls) != 1 {
		t.Fatalf("%d sendMessage calls, want 1", len(calls))
	}
	text := calls[0].Params["text"]
	for _, want := range []string{"@engineer", "writes and reviews code", "@writer", "drafts release notes"} {
		if !strings.Contains(text, want) {
			t.Errorf("help %q lacks %q", text, want)
		}
	}
	if len(e.eng.ins.All()) != 0 {
		t.Error("/help was ingested")
	}
}

// TestCrashBetweenIngestAndOffset stops the loop after Ingest returned but before
// the offset was saved; on restart the update is ingested again under the same
// DedupKey (core ignores it) and the offset is then saved.
func TestCrashBetweenIngestAndOffset(t *testing.T) {
	e := newEnv(t)
	first := e.push(t, readFixture(t, "updates/01_private_text.json"))
	second := e.push(t, readFixture(t, "updates/02_group_mention_and_text_mention.json"))

	ctx, cancel := context.WithCancel(context.Background())
	e.eng.after = func(core.Inbound) { cancel() } // "crash" right after the commit
	a := e.adapter(t, e.options())
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.cursors.get("telegram/main/offset"); got != "" {
		t.Fatalf("offset saved after the crash: %q", got)
	}
	if n := len(e.eng.ins.All()); n != 1 {
		t.Fatalf("%d inbounds before restart, want 1", n)
	}

	e.eng.mu.Lock()
	e.eng.after = nil
	e.eng.mu.Unlock()
	a2 := e.adapter(t, e.options())
	run(t, a2)
	e.waitConfirmed(t, second+1)
	got := e.eng.ins.Wait(t, 3)
	keys := []string{got[0].DedupKey, got[1].DedupKey, got[2].DedupKey}
	want := []string{"telegram:7000000001:100000001:10", "telegram:7000000001:100000001:10", "telegram:-1001000000001:201"}
	if !slices.Equal(keys, want) {
		t.Errorf("ingested %v, want %v (the first again, in order)", keys, want)
	}
	// The offset is saved before the getUpdates that confirmed it.
	if got := e.cursors.get("telegram/main/offset"); got != "500000003" {
		t.Fatalf("offset cursor = %q, want 500000003", got)
	}
	_ = first
}

// TestIngestFailureIsRetried: an update whose Ingest fails is polled again and not
// confirmed until it is stored.
func TestIngestFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.eng.err = errors.New("disk full")
	a := e.adapter(t, e.options())
	run(t, a)
	id := e.push(t, readFixture(t, "updates/01_private_text.json"))
	e.waitCalls(t, "getUpdates", 2)
	if got := e.cursors.get("telegram/main/offset"); got != "" {
		t.Fatalf("offset saved for an update that was not stored: %q", got)
	}
	e.eng.mu.Lock()
	e.eng.err = nil
	e.eng.mu.Unlock()
	// The retry waits one backoff interval (about a second).
	e.eng.ins.Wait(t, 1)
	e.waitConfirmed(t, id+1)
}

// TestTwoAccountsOneGroupMessage: two bots with their own tokens receive the same
// group message mentioning both; each ingests it under the same DedupKey with its
// own handle, so core stores it once and wakes both.
func TestTwoAccountsOneGroupMessage(t *testing.T) {
	e := newEnv(t)
	const token2 = "7000000002:TESTtoken"
	e.srv.AddBot(botUser(token2))
	o2 := e.options()
	o2.Name, o2.Bot, o2.Token = "writer", "writer", token2
	a1, a2 := e.adapter(t, e.options()), e.adapter(t, o2)
	run(t, a1)
	run(t, a2)
	msg := groupMsg(300, "@test_bridge_bot and @writer_bot please sync", ent("mention", 0, 16), ent("mention", 21, 11))
	e.push(t, msg)
	if _, err := e.srv.PushUpdate(token2, msg); err != nil {
		t.Fatal(err)
	}
	got := e.eng.ins.Wait(t, 2)
	if got[0].DedupKey != got[1].DedupKey {
		t.Errorf("dedup keys differ: %q %q", got[0].DedupKey, got[1].DedupKey)
	}
	mentions := []string{got[0].Mentions[0], got[1].Mentions[0]}
	slices.Sort(mentions)
	if !slices.Equal(mentions, []string{"engineer", "writer"}) {
		t.Errorf("mentions %v, want one per account", mentions)
	}
	if got[0].Account == got[1].Account {
		t.Errorf("both from %s", got[0].Account)
	}
}

// TestWholeTeamAccountReplyGoesToSpeaker: on a "*" account, a reply to a message that
// Deliver headed with "Writer" wakes the writer, not the thread's default bot.
func TestWholeTeamAccountReplyGoesToSpeaker(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.Bot = "*"
	a := e.adapter(t, opts)
	a.me = testSelf()
	for _, tt := range []struct{ botText, want string }{
		{"Writer\nDraft ready.", "writer"},
		{"Something else\nDraft ready.", "*"},
	} {
		var u map[string]map[string]any
		_ = json.Unmarshal(groupMsg(int64(len(tt.botText)), "looks good"), &u)
		u["message"]["reply_to_message"] = map[string]any{
			"message_id": 202, "date": 1, "text": tt.botText,
			"from": map[string]any{"id": botID, "is_bot": true, "first_name": "Bridge Bot", "username": botUsername},
			"chat": map[string]any{"id": groupChat, "type": "supergroup"},
		}
		raw, _ := json.Marshal(u)
		var up update
		_ = json.Unmarshal(raw, &up)
		before := len(e.eng.ins.All())
		if err := a.handleUpdate(context.Background(), up); err != nil {
			t.Fatal(err)
		}
		got := e.eng.ins.All()
		if len(got) != before+1 || !slices.Equal(got[len(got)-1].Mentions, []string{tt.want}) {
			t.Errorf("reply to %q: got %+v, want Mentions [%s]", tt.botText, got[len(got)-1].Mentions, tt.want)
		}
	}
}

// TestBareNewThenMessage: "/new" alone is confirmed without a run, and the next
// message starts the new thread, once; "/start" gets the welcome and no run.
func TestBareNewThenMessage(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	a.me = testSelf()
	for i, body := range []string{
		`{"update_id":1,"message":{"message_id":1,"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"},"date":1,"text":"/new","entities":[{"offset":0,"length":4,"type":"bot_command"}]}}`,
		`{"update_id":2,"message":{"message_id":2,"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"},"date":1,"text":"first of the new"}}`,
		`{"update_id":3,"message":{"message_id":3,"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"},"date":1,"text":"second"}}`,
		`{"update_id":4,"message":{"message_id":4,"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"},"date":1,"text":"/start","entities":[{"offset":0,"length":6,"type":"bot_command"}]}}`,
	} {
		var u update
		if err := json.Unmarshal([]byte(body), &u); err != nil {
			t.Fatal(err)
		}
		if err := a.handleUpdate(context.Background(), u); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	got := e.eng.ins.All()
	if len(got) != 2 || got[0].Text != "first of the new" || !got[0].NewThread || got[1].NewThread {
		t.Fatalf("inbounds = %+v; want the message after /new to start a thread, once", got)
	}
	sends := e.srv.Calls("sendMessage")
	if len(sends) != 2 || !strings.Contains(sends[0].Params["text"], "Started a new conversation") || !strings.Contains(sends[1].Params["text"], "Bots on this team") {
		t.Fatalf("replies = %+v", sends)
	}
}

// TestMentionsOfPeopleAndTeamBots: a mention of a person ("@alice", or a
// text_mention of a user without a username) sets MentionsHumans; a mention of
// another of the team's bot accounts (known through Peers) names its bot and is
// written as its @handle; the account's own mention is neither.
func TestMentionsOfPeopleAndTeamBots(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.Peers = NewPeers()
	opts.Peers.add("writer_bot", "writer")
	a := e.adapter(t, opts)
	a.me = testSelf()
	dana := ent("text_mention", 19, 4)
	dana["user"] = map[string]any{"id": 4242, "is_bot": false, "first_name": "Dana"}
	for _, u := range [][]byte{
		groupMsg(2, "@test_bridge_bot @alice what do you think?", ent("mention", 0, 16), ent("mention", 17, 6)),
		groupMsg(3, "@test_bridge_bot ask Dana", ent("mention", 0, 16), dana),
		groupMsg(4, "@test_bridge_bot @Writer_Bot thoughts?", ent("mention", 0, 16), ent("mention", 17, 11)),
		groupMsg(5, "@test_bridge_bot thoughts?", ent("mention", 0, 16)),
	} {
		var up update
		if err := json.Unmarshal(u, &up); err != nil {
			t.Fatal(err)
		}
		if err := a.handleUpdate(context.Background(), up); err != nil {
			t.Fatal(err)
		}
	}
	got := e.eng.ins.All()
	if len(got) != 4 {
		t.Fatalf("%d inbounds, want 4", len(got))
	}
	for i, want := range []struct {
		humans   bool
		mentions []string
		text     string
	}{
		{true, []string{"engineer"}, "@engineer @alice what do you think?"},
		{true, []string{"engineer"}, "@engineer ask Dana"},
		{false, []string{"engineer", "writer"}, "@engineer @writer thoughts?"},
		{false, []string{"engineer"}, "@engineer thoughts?"},
	} {
		if g := got[i]; g.MentionsHumans != want.humans || !slices.Equal(g.Mentions, want.mentions) || g.Text != want.text {
			t.Errorf("message %d: MentionsHumans %v Mentions %v Text %q; want %v %v %q", i, g.MentionsHumans, g.Mentions, g.Text, want.humans, want.mentions, want.text)
		}
	}
}

// TestRunRecordsItselfInPeers: once connected, an account is in the shared
// directory under its bot's username, so the other accounts know it is a bot.
func TestRunRecordsItselfInPeers(t *testing.T) {
	e := newEnv(t)
	opts := e.options()
	opts.Peers = NewPeers()
	a := e.adapter(t, opts)
	run(t, a)
	started(t, e, a)
	if bot, ok := opts.Peers.bot("@" + strings.ToUpper(botUsername)); !ok || bot != "engineer" {
		t.Errorf("Peers has %q, %v for @%s; want engineer", bot, ok, botUsername)
	}
}
